"""Operations that the CLI, the DAGs and the Spark job share: open the store, plan, record a
backfill, submit a batch, audit, status, check the lag against its limits, summarize. The rules behind them live in their own
modules (planner, backfill, audit, status); this is the one place callers enter.

Each caller adds only its own edges (argument parsing, Airflow context, the Spark session).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from eos_ingest.config.pipeline import AlertsConfig, PipelineConfig, replaced
from eos_ingest.connections.kafka import KAFKA_SETTINGS_ENV, connection_settings_from_env, encode_settings
from eos_ingest.control.store import Batch, BatchKind, BatchStatus, ControlStore
from eos_ingest.errors import ConfigError
from eos_ingest.kafka.offsets import fetch_partition_offsets, fetch_snapshot
from eos_ingest.plan.ranges import TopicPartition, plan_ranges
from eos_ingest.redact import redact_text
from eos_ingest.service import lag_alerts, status, trends
from eos_ingest.service.backfill import BackfillRequest, create_backfill, parse_request
from eos_ingest.service.stale_batches import stale_batches
from eos_ingest.spark.session import spark_submit_env
from eos_ingest.spark.submit import DRIVER_MEMORY, spark_submit_argv
from eos_ingest.storage.delta import table_features
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from eos_ingest.storage.iceberg.properties import check_pyiceberg
from eos_ingest.storage.maintain_deletes import vacuum_retention_hours
from eos_ingest.storage.object_stores import uses_object_store
from eos_ingest.storage.table_formats import uses_iceberg

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eos_ingest.service.lag_alerts import LagCheck

log = logging.getLogger(__name__)


def open_store(config: PipelineConfig) -> ControlStore:
    store = ControlStore(config.control_db_url)
    store.ensure_schema()
    return store


def plan_batch(
    config: PipelineConfig,
    store: ControlStore,
    *,
    allow_data_loss: bool = False,
    airflow_run_id: str | None = None,
) -> tuple[Batch | None, bool]:
    """Plan the next scheduled batch to the LSOs read now, or return the pending one unchanged.

    Kafka's cluster id and topic ids, read with the offsets, are checked against the recorded ones
    first (TopicRecreatedError / ClusterMismatchError, exit 2). A pending batch whose ranges Kafka
    has deleted since raises OffsetsLostError before any Spark work; with allow_data_loss it is
    abandoned and a new batch planned from the log start. A plan that succeeds records the lag it
    read as a sample of the pipeline's lag history (trends.record_plan).

    A table with a Delta feature the staged replace cannot keep its guarantees on (deletion
    vectors, column mapping, ...: storage/delta/table_features.py) is refused first, with ConfigError."""
    check_tables(config)
    snapshot = fetch_snapshot(config.kafka_settings, config.topics)
    offsets = snapshot.offsets
    note = "data loss accepted by --allow-data-loss" if allow_data_loss else None
    planned = store.plan_scheduled(
        config.name,
        lambda committed: plan_ranges(
            committed,
            offsets,
            max_records_per_partition=config.max_records_per_partition,
            start_from=config.start_from,
            allow_data_loss=allow_data_loss,
        ),
        identity=snapshot.identity,
        airflow_run_id=airflow_run_id,
        override_note=note,
        log_starts={TopicPartition(o.topic, o.partition): o.log_start for o in offsets},
        allow_data_loss=allow_data_loss,
    )
    # The lag this plan read, for the page's history (a warning, never a failed plan, if not recorded).
    trends.record_plan(config, store, offsets)
    return planned


def check_tables(config: PipelineConfig) -> None:
    """ConfigError naming the table, the feature and the fix when the table or the quarantine
    table has a Delta feature (storage/delta/table_features.py) or an Iceberg property
    (storage/iceberg/properties.py) a batch's staged replace refuses."""
    if config.output.format == "iceberg":
        catalog = IcebergCatalog.of(config).pyiceberg()
        for table in config.output_tables:
            check_pyiceberg(catalog, table)
        return
    for location in (config.output_path, config.quarantine_path):
        table_features.check_location(location)


def catch_up_target(config: PipelineConfig) -> dict[TopicPartition, int]:
    """The last stable offsets now: a catch-up run stops once every partition committed up to them.

    Records produced after this moment are left to the next run, so a run under constant
    production still ends."""
    offsets = fetch_partition_offsets(config.kafka_settings, config.topics)
    return {TopicPartition(o.topic, o.partition): o.last_stable for o in offsets}


def caught_up(committed: Mapping[TopicPartition, int], target: Mapping[TopicPartition, int]) -> bool:
    """True when every partition of `target` has committed offsets at or past its target.

    A partition the pipeline has not seen yet is not caught up: the next plan records it."""
    return all(tp in committed and committed[tp] >= end for tp, end in target.items())


def batch_summary(batch: Batch) -> dict[str, object]:
    return {
        "batch_id": batch.batch_id,
        "kind": str(batch.kind.value),
        "status": str(batch.status.value),
        "fence": batch.fence,
        "records_read": batch.records_read,
        "records_written": batch.records_written,
        "records_quarantined": batch.records_quarantined,
        "delta_version": batch.delta_version,
        "error": batch.error,
        "note": batch.override_note,
        "created_at": batch.created_at.isoformat(),
        "ranges": [
            {"topic": r.topic, "partition": r.partition, "start": r.start, "end": r.end} for r in batch.ranges
        ],
    }


def job_records(batch: Batch, max_records_per_partition: int, *, until_caught_up: bool = False) -> int | None:
    """The records a batch's job will read, as far as the submitter knows (they pick its driver's
    JVM profile, spark.session.driver_jvm_profile): the planned ranges' records. A catch-up run
    reads on past its first batch, so for one the count is known only when no range of the first
    batch stopped at max_records_per_partition; else None."""
    sizes = [r.end - r.start for r in batch.ranges]
    if until_caught_up and any(n >= max_records_per_partition for n in sizes):
        return None
    return sum(sizes)


def job_argv(
    config: PipelineConfig,
    batch: Batch,
    master: str,
    *,
    until_caught_up: bool = False,
    driver_memory: str = DRIVER_MEMORY,
) -> list[str]:
    """The spark-submit command of a planned batch's job, its driver's JVM profile picked by the
    records it will read (job_records)."""
    return spark_submit_argv(
        config.source,
        batch.batch_id,
        master=master,
        driver_memory=driver_memory,
        until_caught_up=until_caught_up,
        object_storage=uses_object_store(config),
        iceberg=uses_iceberg(config),
        job_records=job_records(batch, config.max_records_per_partition, until_caught_up=until_caught_up),
    )


def submit_batch(
    config: PipelineConfig, store: ControlStore, batch_id: int, master: str, *, until_caught_up: bool = False
) -> tuple[int, list[Batch]]:
    """spark-submit the job for a planned batch and wait: (exit code, the batches it ran).

    With until_caught_up the job goes on with the next batches: the list then holds every
    scheduled batch of the run from this one on. The job's output goes to stderr, so a caller's
    stdout carries only what it prints itself."""
    argv = job_argv(config, store.get_batch(batch_id), master, until_caught_up=until_caught_up)
    env = spark_submit_env()
    conn_settings = connection_settings_from_env(config.kafka_conn_id, os.environ)
    if conn_settings:
        # As in Airflow: the connection's settings reach the job in the environment, never in argv.
        env[KAFKA_SETTINGS_ENV] = encode_settings(conn_settings)
    code = subprocess.run(argv, env=env, stdout=sys.stderr, check=False).returncode
    if until_caught_up:
        return code, store.batches_of_run(config.name, batch_id)
    return code, [store.get_batch(batch_id)]


def run_batches(store: ControlStore, config: PipelineConfig, batch_id: int) -> list[Batch]:
    """The batch and, for a catch-up (a scheduled batch of an Airflow run), the committed
    scheduled batches the job planned after it under the same Airflow run id."""
    first = store.get_batch(batch_id)
    if first.kind is not BatchKind.SCHEDULED or first.airflow_run_id is None:
        return [first]
    later = store.batches_of_run(config.name, batch_id)[1:]
    return [first] + [
        b for b in later if b.airflow_run_id == first.airflow_run_id and b.status is BatchStatus.COMMITTED
    ]


def unfinished_catch_up_batch(store: ControlStore, batch_id: int) -> Batch | None:
    """The batch of a catch-up run (started by `batch_id`) that did not commit: a later batch that
    failed, or is still planned because its attempt crashed. None when every batch of the run
    committed, and for a batch that is not the first of an Airflow catch-up run."""
    first = store.get_batch(batch_id)
    if first.kind is not BatchKind.SCHEDULED or first.airflow_run_id is None:
        return None
    for batch in store.batches_of_run(first.pipeline, batch_id):
        if batch.airflow_run_id == first.airflow_run_id and batch.status is not BatchStatus.COMMITTED:
            return batch
    return None


def audit_batches(
    config: PipelineConfig, batch_ids: Sequence[int], *, recount: bool = False, audit_process: bool = False
) -> list[dict[str, Any]]:
    """Audit committed batches (audit.audit_batch): read with delta-rs, no Spark session.

    audit_process: the caller's process does nothing else with GX (the CLI's audit command, the
    validate task), so GX imports without its pyspark bindings when pyspark is not imported yet:
    ~0.12 s of CPU less (quality/gx_import.hidden). Such a process validates pandas frames only.
    """
    # Here, not at the top: the audit brings pandas, numpy and pyarrow (~110 MB and ~0.9 s of CPU
    # before GX's own import), which every other command of the service layer does without: a run's
    # CLI process waits beside its Spark driver for the whole batch, and Airflow's tasks start one.
    from eos_ingest.quality.audit import audit_batch  # noqa: PLC0415 pandas: out of the other commands
    from eos_ingest.quality.gate import preload_gx  # noqa: PLC0415 pyarrow: out of the other commands

    if audit_process:
        preload_gx(hide=("pyspark",))
    return [audit_batch(config, batch_id, recount=recount) for batch_id in batch_ids]


def record_backfill(
    config: PipelineConfig,
    store: ControlStore,
    params: Mapping[str, Any],
    *,
    airflow_run_id: str | None = None,
) -> tuple[Batch, BackfillRequest]:
    """Check a backfill request (backfill.PARAM_KEYS) and record its planned batch.

    An invalid request raises BackfillRangeError or ConfigError before anything is written; so
    does a table with a Delta feature the staged replace refuses (storage/delta/table_features.py).
    """
    request = parse_request(params, config.topics)
    check_tables(config)
    return create_backfill(config, store, request, airflow_run_id=airflow_run_id), request


def abandon_batch(config: PipelineConfig, store: ControlStore, batch_id: int, reason: str) -> dict[str, Any]:
    """Give up a planned batch of this pipeline (BatchStateError for another pipeline's, or one
    not planned), then remove what its attempts staged where that is safe at once: on Iceberg its
    branches (an attempt still running finds its branch gone and publishes nothing). A Delta
    attempt's staged files are left to VACUUM: an attempt that passed its last fence check may
    still commit them for a while (vacuum_lock.ABANDONED_IN_FLIGHT), and deleting them first
    would leave a commit naming missing files."""
    store.get_pipeline_batch(config.name, batch_id)  # never another pipeline's batch
    store.abandon_batch(batch_id, reason)
    shown: dict[str, Any] = {"batch_id": batch_id, "status": "abandoned"}
    if config.output.format == "iceberg":
        # iceberg/maintenance imports pyspark (through iceberg/branch); an abandon runs without it.
        from eos_ingest.storage.iceberg.maintenance import remove_batch_branches  # noqa: PLC0415 JVM-free abandon

        table, quarantine = config.output_tables
        try:
            removed = remove_batch_branches(
                IcebergCatalog.of(config), {"table": table, "quarantine": quarantine}, batch_id
            )
        except Exception as exc:  # the abandon stands; maintain removes a branch left behind
            log.warning("batch %s: abandoned, its branches not removed: %s", batch_id, exc)
            shown["branches_error"] = redact_text(f"{type(exc).__name__}: {exc}")
            removed = []
        shown["branches_removed"] = removed
    else:
        shown["staged_files"] = "left to VACUUM (docs/maintenance.md)"
    return shown


def clean_dead_attempts(config: PipelineConfig, store: ControlStore, batch_id: int) -> dict[str, list[str]]:
    """Once a batch committed on Delta, delete the files its killed attempts staged in the table
    and the quarantine table (storage/delta/dead_attempts.py: local tables, only files that hold this
    batch's rows alone); per table the paths deleted. Nothing for a batch not committed, nor on
    Iceberg, where the committed attempt removed the dead attempts' branches before its own."""
    batch = store.get_batch(batch_id)
    if batch.status is not BatchStatus.COMMITTED or config.output.format != "delta":
        return {}
    # dead_attempts imports pyarrow and delta-rs, which only this command needs.
    from eos_ingest.storage.delta.dead_attempts import delete_dead_attempt_files  # noqa: PLC0415 delta-rs only here

    deleted: dict[str, list[str]] = {}
    for name, location, version in (
        ("table", config.output_path, batch.delta_version),
        ("quarantine", config.quarantine_path, batch.quarantine_delta_version),
    ):
        try:
            deleted[name] = delete_dead_attempt_files(location, batch_id, batch.created_at, version)
        except Exception as exc:  # the batch committed all the same; VACUUM deletes them in time
            log.warning(
                "batch %s: the dead attempts' files of the %s stay for VACUUM: %s", batch_id, name, exc
            )
            deleted[name] = []
    return deleted


def maintain(
    config: PipelineConfig,
    store: ControlStore,
    spark: SparkSession | None,
    *,
    retention_hours: float | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """OPTIMIZE and VACUUM the pipeline's table and quarantine table (delta.maintenance.maintain_tables);
    on Iceberg, compaction, stale branches, expired snapshots and orphan files (_maintain_iceberg).

    The VACUUM retention is checked against the pipeline's planned batches first
    (maintain_deletes.vacuum_retention_hours): a retention that a planned batch may still need raises
    ConfigError before anything is changed; and again, under the pipeline's VACUUM lock, when
    VACUUM is due (MaintenanceBusyError if a batch planned since then needs more). `spark` may be
    None for a dry run."""
    # delta/maintenance imports delta-spark (the JVM's Python side); a CLI that does not maintain never loads it.
    from eos_ingest.storage.delta.maintenance import maintain_table, maintain_tables  # noqa: PLC0415 delta-spark only here

    planned = store.planned_batches(config.name)
    hours = vacuum_retention_hours(planned, retention_hours)
    # The planned batches past the bound that hold this retention up and the VACUUM lock away.
    stale = stale_batches(config.name, planned)
    for entry in stale:
        log.warning("maintain: %s", entry["message"])
    head = {"pipeline": config.name, "dry_run": dry_run, "retention_hours": hours, "stale_batches": stale}
    if config.output.format == "iceberg":
        return {**head, **_maintain_iceberg(config, store, spark, retention_hours, dry_run)}
    locations = {"table": config.output_path, "quarantine": config.quarantine_path}
    if dry_run:
        tables = {name: maintain_table(None, loc, hours, dry_run=True) for name, loc in locations.items()}
    else:
        if spark is None:
            raise ValueError("maintain needs a Spark session unless dry_run")
        tables = maintain_tables(spark, store, config.name, locations, retention_hours)
    return {**head, **tables}


def _maintain_iceberg(
    config: PipelineConfig,
    store: ControlStore,
    spark: SparkSession | None,
    retention_hours: float | None,
    dry_run: bool,
) -> dict[str, Any]:
    """maintain of an Iceberg pipeline: compaction, stale branches, expired snapshots and orphan
    files of its table and quarantine table (storage/iceberg/maintenance.py)."""
    # iceberg/maintenance imports pyspark (through iceberg/branch); a dry run runs without it.
    from eos_ingest.storage.iceberg.maintenance import (  # noqa: PLC0415 JVM-free dry run
        dry_run_iceberg_tables,
        maintain_iceberg_tables,
    )

    catalog = IcebergCatalog.of(config)
    table, quarantine = config.output_tables
    tables = {"table": table, "quarantine": quarantine}
    if dry_run:
        return dry_run_iceberg_tables(store, catalog, tables)
    if spark is None:
        raise ValueError("maintain needs a Spark session unless dry_run")
    return maintain_iceberg_tables(spark, store, config.name, catalog, tables, retention_hours)


def pipeline_status(config: PipelineConfig, store: ControlStore, *, batches: int = 10) -> dict[str, Any]:
    """status.pipeline_status with the planner's retried Kafka read: a broker that does not answer
    raises KafkaUnavailableError rather than giving a status without Kafka columns (the page's
    choice, which calls status.pipeline_status directly)."""
    return status.pipeline_status(
        config,
        store,
        batches=batches,
        read_offsets=lambda: fetch_partition_offsets(config.kafka_settings, config.topics),
    )


def check_lag(
    config: PipelineConfig,
    store: ControlStore,
    *,
    max_lag_records: int | None = None,
    max_lag_seconds: int | None = None,
) -> LagCheck:
    """The lag against the pipeline's `alerts:` limits (lag_alerts.check_lag); a limit given here
    replaces the file's. ConfigError when neither gives a limit."""
    limits = config.alerts or AlertsConfig()
    if max_lag_records is not None:
        limits = replaced(limits, max_lag_records=max_lag_records)
    if max_lag_seconds is not None:
        limits = replaced(limits, max_lag_seconds=max_lag_seconds)
    if limits.max_lag_records is None and limits.max_lag_seconds is None:
        raise ConfigError(
            f"pipeline {config.name} has no lag limit: add `alerts: {{max_lag_records: N, "
            f"max_lag_seconds: S}}` to {config.source.name}, or pass --max-lag-records / --max-lag-seconds"
        )
    return lag_alerts.check_lag(config, store, limits)

"""What a person asks of a pipeline: its offsets, its lag, its recent batches and their checks.

Plain, JSON-serialisable data read from the control DB and Kafka. This module is the one
implementation of lag: the Airflow UI plugin (eos_ingest/airflow/ingestion_page.py), ``eos-ingest status``
(cli.cmd_status), scripts and tests all call pipeline_status / partition_status. No Airflow import.

Lag of a partition = its last stable offset (LSO) - its committed offset: the offsets the next
scheduled batches will plan (aborted records and transaction markers included, so it is an upper
bound of the records). A partition with no committed offset yet lags by what its first batch would
take, from where the planner starts it (planner.plan_ranges):

* ``start_from: earliest``: LSO - log start;
* ``start_from: latest`` on a topic the pipeline has never committed: 0 (the first batch starts at
  the LSO, so nothing already in the log is lag);
* a new partition of a topic the pipeline already reads: LSO - log start, whatever ``start_from``
  says (the planner starts a partition added later at its log start, so no record is skipped).

The age of the lag: for each lagging partition, the timestamp of the record at its committed
offset (the oldest record not ingested yet), read once with a bound (oldest_unread).

A status page must render while the broker is down: then the Kafka columns are empty and
``kafka_error`` says why, and the control DB part is still there.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from confluent_kafka import KafkaException

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.store import Batch, BatchStatus, ControlStore
from eos_ingest.errors import EosIngestError
from eos_ingest.kafka.offsets import fetch_partition_offsets
from eos_ingest.kafka.timestamps import first_record_timestamps
from eos_ingest.plan.ranges import PartitionOffsets, TopicPartition
from eos_ingest.quality.data_docs import data_docs_relpath
from eos_ingest.redact import redact_text, redact_tree, secrets_of
from eos_ingest.service.stale_batches import stale_batches
from eos_ingest.storage.table_formats import output_reader
from eos_ingest.storage.table_names import QUARANTINE, TABLE
from eos_ingest.storage.table_reader import page_figures

__all__ = [
    "batch_duration_s",
    "batch_page",
    "batch_status",
    "oldest_unread",
    "partition_status",
    "pipeline_status",
    "status_store",
]

log = logging.getLogger(__name__)

# A page waits this long for the broker, once: the planner's retries (minutes) are for batches.
KAFKA_TIMEOUT_S = 5.0
# And this long for the records at the committed offsets (the age of the lag), once, after that.
RECORD_TIMEOUT_S = 3.0


@lru_cache(maxsize=32)
def status_store(url: str) -> ControlStore:
    """A ControlStore for status reads, one per URL and process, its schema ensured once.

    One connect attempt: a page reports an unreachable database instead of retrying for seconds.
    Ensuring the schema (idempotent, as every CLI command does) lets a pipeline that never ran show
    "no batches" rather than a missing-table error. Nothing is cached when it raises.
    """
    store = ControlStore(url, connect_attempts=1)
    store.ensure_schema()
    return store


def pipeline_status(
    config: PipelineConfig,
    store: ControlStore,
    *,
    batches: int = 10,
    before: int | None = None,
    after: int | None = None,
    offsets: list[PartitionOffsets] | None = None,
    kafka_timeout_s: float | None = None,
    read_offsets: Callable[[], list[PartitionOffsets]] | None = None,
    read_timestamps: Callable[[Mapping[tuple[str, int], int]], Mapping[tuple[str, int], int | None]]
    | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The pipeline's partitions (committed offset, log start, LSO, lag) and its last `batches`.

    `offsets` are read from Kafka when not given, after the control DB (a batch committing in
    between can only make the lag look larger, never negative). By default in one attempt of
    `kafka_timeout_s` (default KAFKA_TIMEOUT_S); if Kafka cannot answer, the partitions known to
    the control DB are listed without Kafka columns and ``kafka_error`` holds the reason.
    `read_offsets`, when given, reads them instead and its errors raise (the CLI passes the
    planner's retried read). Control DB errors raise: without the DB there is nothing to show.

    `batches` is a page of the history: the newest, those below batch id `before`, or those just
    above `after` (``page`` says where the next pages start; see batch_page). Each lagging
    partition also gets the timestamp and age of its oldest unread record, read from Kafka within
    RECORD_TIMEOUT_S (`read_timestamps` replaces the read; see oldest_unread).
    """
    committed = store.committed_offsets(config.name)
    recent, page = batch_page(store, config.name, batches, before=before, after=after)
    kafka_error = None
    if offsets is None and read_offsets is not None:
        offsets = read_offsets()
    if offsets is None:
        try:
            offsets = _fetch_offsets(config, kafka_timeout_s or KAFKA_TIMEOUT_S)
        except (EosIngestError, KafkaException, ValueError) as exc:
            # KafkaUnavailableError, TopicNotFoundError, a bad librdkafka setting, or offsets read
            # inconsistently (ValueError from PartitionOffsets): all are the broker side's story.
            # A librdkafka error may quote a setting: shown redacted, as every value here.
            kafka_error = redact_text(f"{type(exc).__name__}: {exc}", secrets_of(config.kafka))
            log.warning("pipeline %s: status without Kafka offsets: %s", config.name, kafka_error)
    partitions = partition_status(committed, offsets or [], config.start_from)
    unread_error = oldest_unread(
        config, partitions, read_timestamps, now or datetime.now(UTC), kafka_error=kafka_error
    )
    lags = [p["lag"] for p in partitions if p["lag"] is not None]
    reader = output_reader(config)
    # What the page, its JSON and `eos-ingest status` show: batch errors and notes may quote a URL
    # or a setting (eos_ingest.redact); bootstrap.servers may carry credentials in a URL form.
    shown: dict[str, Any] = redact_tree(
        {
            "pipeline": config.name,
            "topics": list(config.topics),
            "schedule": config.schedule,
            # The `alerts:` limits the eos_alerts__<name> DAG checks (service/lag_alerts.py); None: no alerts.
            "alerts": None if config.alerts is None else config.alerts.model_dump(),
            "start_from": config.start_from,
            "max_records_per_partition": config.max_records_per_partition,
            "bootstrap_servers": config.kafka.get("bootstrap.servers"),
            # Delta: the tables' folders (or URIs); Iceberg: their Spark names, catalog.namespace.table.
            "table_format": reader.format,
            "version_label": reader.version_label,  # what a table's and a batch's version is
            "output_path": reader.name(TABLE).shown,
            "quarantine_path": reader.name(QUARANTINE).shown,
            "control_db": store.safe_url,
            "kafka_error": kafka_error,
            "total_lag": None if kafka_error else sum(max(lag, 0) for lag in lags),
            "oldest_unread_age_s": _max_age(partitions),
            "oldest_unread_error": unread_error,
            "partitions": partitions,
            "batches": [batch_status(b) for b in recent],
            # Planned batches past the bound (stale_batches.py): what each holds back, the way out.
            "stale_batches": stale_batches(config.name, store.planned_batches(config.name), now=now),
            "page": page,
            # Per table: its version (Delta's, or Iceberg's snapshot id), file count, bytes and the
            # last maintenance (storage/table_reader.py).
            "tables": page_figures(reader),
        }
    )
    return shown


def batch_page(
    store: ControlStore, pipeline: str, size: int, *, before: int | None = None, after: int | None = None
) -> tuple[list[Batch], dict[str, int | None]]:
    """One page of `size` batches, newest first, and where its neighbours start:
    ``{"newer_after": id or None, "older_before": id or None}`` (None: there is no such page).

    Keyset pages on the batch id (ControlStore.list_batches), so a page costs the same at batch
    10,000 as at batch 1. One batch more than shown is read to know whether an older page exists
    (and, reading upwards, a newer one); the other direction costs one more indexed read of one
    row. A page above `after` that reaches the newest batch is the first page: always full.
    """
    if after is not None:
        rows = store.list_batches(pipeline, size + 1, after=after)
        if len(rows) > size:  # the extra row is the newest: there is a newer page
            shown = rows[1:]
            older = bool(store.list_batches(pipeline, 1, before=shown[-1].batch_id))
            return shown, {
                "newer_after": shown[0].batch_id,
                "older_before": shown[-1].batch_id if older else None,
            }
        before = None
    rows = store.list_batches(pipeline, size + 1, before=before)
    shown = rows[:size]
    newer = (
        before is not None and bool(shown) and bool(store.list_batches(pipeline, 1, after=shown[0].batch_id))
    )
    return shown, {
        "newer_after": shown[0].batch_id if newer else None,
        "older_before": shown[-1].batch_id if len(rows) > size else None,
    }


def oldest_unread(
    config: PipelineConfig,
    partitions: list[dict[str, Any]],
    read_timestamps: Callable[[Mapping[tuple[str, int], int]], Mapping[tuple[str, int], int | None]] | None,
    now: datetime,
    *,
    kafka_error: str | None = None,
) -> str | None:
    """Fill each partition's ``oldest_unread_timestamp`` (ISO, UTC) and ``oldest_unread_age_s``:
    the record at its committed offset (where the next batch starts reading) and how long ago it
    was written. Both are None for a partition with nothing unread, and for one whose record could
    not be read in time: then ``oldest_unread_unknown`` is True and the returned reason says why.

    Read once, bounded (RECORD_TIMEOUT_S), never retried: the page must answer while the broker
    is down or slow.
    """
    positions: dict[tuple[str, int], int] = {}
    for p in partitions:
        p.update(oldest_unread_timestamp=None, oldest_unread_age_s=None, oldest_unread_unknown=False)
        if p["lag"] is not None and p["lag"] > 0:
            # A partition no batch has read yet starts at its log start (partition_status's lag).
            at = p["committed_offset"] if p["committed_offset"] is not None else p["log_start"]
            positions[(p["topic"], p["partition"])] = at
        elif p["lag"] is None and kafka_error is not None:
            p["oldest_unread_unknown"] = True
    if kafka_error is not None:
        return f"no Kafka offsets: {kafka_error}"
    if not positions:
        return None
    read = read_timestamps or (lambda at: _fetch_timestamps(config, at))
    error, stamps = None, {}
    try:
        stamps = dict(read(positions))
    except (EosIngestError, KafkaException, ValueError) as exc:
        error = redact_text(f"{type(exc).__name__}: {exc}", secrets_of(config.kafka))
        log.warning("pipeline %s: status without the oldest unread records: %s", config.name, error)
    for p in partitions:
        tp = (p["topic"], p["partition"])
        if tp not in positions:
            continue
        if tp not in stamps:
            p["oldest_unread_unknown"] = True
            error = (
                error
                or f"Kafka did not return the record at the committed offset within {RECORD_TIMEOUT_S:g} s"
            )
        elif (stamp := stamps[tp]) is not None:
            at = datetime.fromtimestamp(stamp / 1000, UTC)
            p["oldest_unread_timestamp"] = at.isoformat()
            p["oldest_unread_age_s"] = round(max((now - at).total_seconds(), 0.0), 3)
    return error


def _max_age(partitions: list[dict[str, Any]]) -> float | None:
    ages = [p["oldest_unread_age_s"] for p in partitions if p["oldest_unread_age_s"] is not None]
    return max(ages) if ages else None


def _fetch_timestamps(
    config: PipelineConfig, positions: Mapping[tuple[str, int], int]
) -> dict[tuple[str, int], int | None]:
    settings = config.kafka_settings
    settings.setdefault("log_level", "2")
    return first_record_timestamps(settings, positions, timeout_s=RECORD_TIMEOUT_S)


def _fetch_offsets(config: PipelineConfig, timeout_s: float) -> list[PartitionOffsets]:
    settings = config.kafka_settings
    # librdkafka logs every refused connection to stderr (20 lines a second); the error we keep
    # says the same once. The file's own log_level, if any, wins.
    settings.setdefault("log_level", "2")
    return fetch_partition_offsets(settings, config.topics, timeout_s=timeout_s, attempts=1, backoff_s=0)


def partition_status(
    committed: Mapping[TopicPartition, int], offsets: Sequence[PartitionOffsets], start_from: str
) -> list[dict[str, Any]]:
    """One row per partition known to Kafka or to the control DB, sorted by (topic, partition).

    Lag follows the planner: a partition not yet in the control DB lags by what its first batch
    would take (LSO - log start; 0 with ``latest`` on a topic the pipeline has never seen).
    ``note`` names what the next plan will refuse: offsets deleted by retention, or an LSO below
    the committed offset.
    """
    by_tp = {TopicPartition(o.topic, o.partition): o for o in offsets}
    seen_topics = {tp.topic for tp in committed}
    rows = []
    for tp in sorted(set(by_tp) | set(committed)):
        at, o = committed.get(tp), by_tp.get(tp)
        lag, note = None, None
        if o is not None and at is None:
            latest = start_from == "latest" and tp.topic not in seen_topics
            lag = 0 if latest else o.last_stable - o.log_start
            note = f"new partition: the next batch starts at its {'latest' if latest else 'earliest'} offset"
        elif o is not None and at is not None:
            lag = o.last_stable - at
            if at < o.log_start:
                note = (
                    f"offsets [{at}, {o.log_start}) were deleted by retention before ingestion: "
                    "the next plan fails until the loss is accepted (--allow-data-loss)"
                )
            elif o.last_stable < at:
                note = "last stable offset below the committed offset: was the topic deleted and recreated?"
        rows.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed_offset": at,
                "log_start": None if o is None else o.log_start,
                "last_stable_offset": None if o is None else o.last_stable,
                "lag": lag,
                "note": note,
            }
        )
    return rows


def batch_status(batch: Batch) -> dict[str, Any]:
    """A batch as JSON-able data, with its data-quality summary and its Data Docs link."""
    dq = _dq_summary(batch.dq_result)
    return {
        "batch_id": batch.batch_id,
        "kind": batch.kind.value,
        "status": batch.status.value,
        "fence": batch.fence,
        "records_read": batch.records_read,
        "records_written": batch.records_written,
        "records_quarantined": batch.records_quarantined,
        "delta_version": batch.delta_version,
        "quarantine_delta_version": batch.quarantine_delta_version,
        "dq_success": batch.dq_success,
        "dq_stage": dq.get("stage"),
        "dq_critical_failures": dq.get("critical_failures", []),
        "dq_warnings": dq.get("warnings", []),
        "dq_report_path": batch.dq_report_path,
        "dq_report_docs_path": data_docs_relpath(batch.dq_report_path),
        "error": batch.error,
        "note": batch.override_note,
        "airflow_run_id": batch.airflow_run_id,
        "created_at": batch.created_at.isoformat(),
        "updated_at": batch.updated_at.isoformat(),
        "committed_at": None if batch.committed_at is None else batch.committed_at.isoformat(),
        "duration_s": batch_duration_s(batch),
        "ranges": [
            {"topic": r.topic, "partition": r.partition, "start": r.start, "end": r.end} for r in batch.ranges
        ],
    }


def batch_duration_s(batch: Batch) -> float | None:
    """Seconds from the batch's plan to its commit, or to its failure or abandon (its last update);
    None while it is planned. Everything between counts: the wait for Spark, the read, the gate."""
    if batch.committed_at is not None:
        end = batch.committed_at
    elif batch.status is BatchStatus.PLANNED:
        return None
    else:
        end = batch.updated_at
    return round(max((end - batch.created_at).total_seconds(), 0.0), 3)


def _dq_summary(result_json: str | None) -> dict[str, Any]:
    """The few fields of the stored GX report a status shows; {} if there is none or it is not JSON."""
    try:
        report = json.loads(result_json) if result_json else {}
    except ValueError:
        return {}
    if not isinstance(report, dict):
        return {}
    return {
        "stage": report.get("stage"),
        "critical_failures": [str(f) for f in _as_list(report.get("critical_failures"))],
        "warnings": [str(w) for w in _as_list(report.get("warnings"))],
    }


def _as_list(value: Any) -> Iterable[Any]:
    return value if isinstance(value, list) else []

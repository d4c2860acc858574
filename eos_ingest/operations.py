"""Operations that the CLI, the DAGs and the Spark job share: open the store, plan, summarize.

Each caller adds only its own edges (argument parsing, Airflow context, the Spark session).
"""

from __future__ import annotations

from collections.abc import Mapping

from eos_ingest.config import PipelineConfig
from eos_ingest.control_store import Batch, ControlStore
from eos_ingest.kafka_offsets import fetch_partition_offsets, fetch_snapshot
from eos_ingest.planner import TopicPartition, plan_ranges


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
    abandoned and a new batch planned from the log start."""
    snapshot = fetch_snapshot(config.kafka_settings, config.topics)
    offsets = snapshot.offsets
    note = "data loss accepted by --allow-data-loss" if allow_data_loss else None
    return store.plan_scheduled(
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

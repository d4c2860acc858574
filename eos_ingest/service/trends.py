"""A pipeline's recent history for the page's charts: its lag over the last 24 hours and its last
batches' duration and counts. Plain, JSON-serialisable data; the page draws it (airflow/page_charts.py).

The lag is sampled where it is already read, into the control DB (control/lag_samples.py, bounded):

* each plan of a scheduled batch (operations.plan_batch): the lag in offsets from the offsets the
  plan read and the committed offsets after it; no age, since a plan reads no record;
* each lag check (lag_alerts.check_lag: ``eos-ingest check-lag``, the eos_alerts__<name> DAG): the
  lag and the age of the oldest unread record, as the check read them.

A sample is a convenience, not part of the protocol: one that cannot be recorded is a warning,
and the plan or the check goes on. Both use status.py's lag (the one implementation), so a sample
means what the page's total lag means.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.schema import LagSource, utc_now
from eos_ingest.control.store import ControlStore, LagSample
from eos_ingest.plan.ranges import PartitionOffsets
from eos_ingest.redact import redact_text
from eos_ingest.service import status

__all__ = ["BATCHES", "BUCKETS", "WINDOW", "lag_figures", "pipeline_trends", "record_check", "record_plan"]

log = logging.getLogger(__name__)

WINDOW = timedelta(hours=24)
# The window is drawn as at most this many points (5 minutes each), each the largest lag and age
# of its samples: a catch-up's sample per batch would otherwise be thousands, and a peak is what
# a lag chart must not lose.
BUCKETS = 288
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
BATCHES = 30


def lag_figures(partitions: Sequence[Mapping[str, Any]]) -> tuple[int, float | None]:
    """The pipeline's lag from status.partition_status rows with status.oldest_unread's ages:
    (the sum of the positive lags, as the page's total lag; the largest known age, as the page's
    total row: 0 when nothing is unread, None when no age is known because a lagging partition's
    record was not read in time)."""
    records = sum(max(p["lag"], 0) for p in partitions if p["lag"] is not None)
    ages = [p["oldest_unread_age_s"] for p in partitions if p.get("oldest_unread_age_s") is not None]
    if ages:
        return records, max(ages)
    if any(p.get("oldest_unread_unknown") for p in partitions):
        return records, None
    return records, 0.0


def record_plan(config: PipelineConfig, store: ControlStore, offsets: Sequence[PartitionOffsets]) -> None:
    """The lag a plan read (Kafka's `offsets`, the committed offsets after the plan), without age."""

    def read() -> tuple[int, float | None]:
        committed = store.committed_offsets(config.name)
        records, _ = lag_figures(status.partition_status(committed, offsets, config.start_from))
        return records, None

    _record(store, config.name, LagSource.PLAN, read)


def record_check(pipeline: str, store: ControlStore, partitions: Sequence[Mapping[str, Any]]) -> None:
    """The lag and oldest unread age a lag check read (`partitions`: status rows with their ages)."""
    _record(store, pipeline, LagSource.CHECK_LAG, lambda: lag_figures(partitions))


def _record(
    store: ControlStore, pipeline: str, source: LagSource, read: Callable[[], tuple[int, float | None]]
) -> None:
    try:
        records, age = read()
        store.record_lag_sample(pipeline, LagSample(utc_now(), source, records, age))
    except Exception as exc:  # any failure: the history has a gap, the plan or check goes on
        shown = redact_text(f"{type(exc).__name__}: {exc}")
        log.warning(
            "pipeline %s: the lag read by this %s was not recorded: %s", pipeline, source.value, shown
        )


def pipeline_trends(
    store: ControlStore, pipeline: str, now: datetime, *, window: timedelta = WINDOW, batches: int = BATCHES
) -> dict[str, Any]:
    """The lag samples of the last `window` (at most BUCKETS points, oldest first) and the last
    `batches` batches (oldest first) with their duration and counts, as status.batch_status has them.

    ``ago_s`` is each point's distance from `now`, what the chart's x axis is made of."""
    since = now - window
    lag = [
        {
            "at": sample.sampled_at.isoformat(),
            "ago_s": round((now - sample.sampled_at).total_seconds(), 3),
            "samples": count,
            "lag_records": sample.lag_records,
            "oldest_unread_age_s": sample.oldest_unread_age_s,
        }
        for sample, count in _largest_per_bucket(store.lag_samples_since(pipeline, since), window)
    ]
    recent = [status.batch_status(b) for b in reversed(store.list_batches(pipeline, batches))]
    keys = (
        "batch_id",
        "kind",
        "status",
        "created_at",
        "duration_s",
        "records_written",
        "records_quarantined",
    )
    return {
        "window_hours": window.total_seconds() / 3600,
        "lag": lag,
        "batches": [{k: b[k] for k in keys} for b in recent],
    }


def _largest_per_bucket(samples: Sequence[LagSample], window: timedelta) -> list[tuple[LagSample, int]]:
    """One sample per BUCKETS-th of the window: at the bucket's newest sample's time, with the
    bucket's largest lag and largest known age; and how many samples it stands for. The buckets
    are fixed on the clock (every 5 minutes from the epoch), so a reload groups samples alike."""
    size = window / BUCKETS
    buckets: dict[int, list[LagSample]] = {}
    for sample in samples:
        buckets.setdefault((sample.sampled_at - EPOCH) // size, []).append(sample)
    merged = []
    for group in buckets.values():
        ages = [s.oldest_unread_age_s for s in group if s.oldest_unread_age_s is not None]
        newest = group[-1]
        largest = LagSample(
            newest.sampled_at, newest.source, max(s.lag_records for s in group), max(ages) if ages else None
        )
        merged.append((largest, len(group)))
    return merged

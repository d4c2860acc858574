"""Lag and freshness alerts: a pipeline's lag against the limits of its ``alerts:`` block.

The figures are service/status.py's (the one implementation of lag): per partition the lag in offsets
(LSO - committed offset, status.partition_status) and the age of the oldest unread record
(status.oldest_unread). A limit is *passed* when a figure is above it:

* ``max_lag_records``: the pipeline's total lag (the sum over its partitions) is above it; the
  partitions whose own lag is above it are named too;
* ``max_lag_seconds``: the oldest unread record of some partition is older than that.

The lag counts offsets, so transaction markers and aborted records are included (an upper bound
of the records, as on the page). Pure evaluation (evaluate) is apart from the reads (check_lag),
so the rules are tested without a broker. No Airflow import: the CLI (``eos-ingest check-lag``)
and the eos_alerts__<name> DAG (airflow/alerts.py) both call operations.check_lag.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from eos_ingest.config.pipeline import AlertsConfig, PipelineConfig
from eos_ingest.control.store import ControlStore
from eos_ingest.errors import EosIngestError
from eos_ingest.kafka.offsets import fetch_partition_offsets
from eos_ingest.plan.ranges import PartitionOffsets
from eos_ingest.service import status, trends
from eos_ingest.service.stale_batches import stale_batches

RECORDS, SECONDS = "max_lag_records", "max_lag_seconds"


class LagUnknownError(EosIngestError):
    """The age of an oldest unread record could not be read, and an age limit needs it: run the
    check again (retriable) rather than call a pipeline fresh that may not be."""

    retriable = True


@dataclass(frozen=True)
class LimitPassed:
    """One limit passed: by the total (``where`` = "total") or by one partition ("topic[p]")."""

    limit: str  # RECORDS or SECONDS
    where: str
    figure: float
    value: int

    def describe(self) -> str:
        what = "lag" if self.limit == RECORDS else "oldest unread record"
        unit = "records (offsets)" if self.limit == RECORDS else "s old"
        return f"{self.where} {what} {self.figure:g} {unit} > {self.limit} {self.value}"


@dataclass(frozen=True)
class LagCheck:
    """The figures of one check and the limits they pass."""

    pipeline: str
    limits: AlertsConfig
    total_lag: int
    oldest_unread_age_s: float | None
    partitions: list[dict[str, Any]]
    passed: tuple[LimitPassed, ...] = ()
    # Why an age limit could not be checked (a partition's oldest unread record was not read).
    unknown: str | None = None
    checked_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    # Planned batches past the stale bound (service/stale_batches.py): an alert of their own, as
    # nothing reruns a killed backfill and it holds maintain back until a person resumes or abandons it.
    stale: tuple[dict[str, Any], ...] = ()

    @property
    def failed(self) -> bool:
        """True when the pipeline passes a limit (the total lag, or the oldest unread age), or has
        a planned batch past the stale bound."""
        return any(p.where == "total" for p in self.passed) or bool(self.stale)

    def message(self) -> str:
        """One line naming the pipeline, each figure and its limit (the DAG task's failure)."""
        if not self.failed:
            return f"pipeline {self.pipeline}: within its lag limits ({self._figures()})"
        totals = [p for p in self.passed if p.where == "total"]
        parts = [entry["message"] for entry in self.stale]
        for total in totals:
            by = [p.where for p in self.passed if p.limit == total.limit and p.where != "total"]
            parts.append(total.describe().removeprefix("total ") + (f" ({', '.join(by)})" if by else ""))
        return f"pipeline {self.pipeline}: " + "; ".join(parts)

    def _figures(self) -> str:
        age = "none unread" if self.oldest_unread_age_s is None else f"{self.oldest_unread_age_s:g} s"
        return f"lag {self.total_lag} records (offsets), oldest unread record {age}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "checked_at": self.checked_at.isoformat(),
            "limits": {RECORDS: self.limits.max_lag_records, SECONDS: self.limits.max_lag_seconds},
            "total_lag": self.total_lag,
            "oldest_unread_age_s": self.oldest_unread_age_s,
            "passed": [asdict(p) for p in self.passed],
            "failed": self.failed,
            "unknown": self.unknown,
            "stale_batches": list(self.stale),
            "message": self.message(),
            "partitions": self.partitions,
        }


def evaluate(
    pipeline: str, limits: AlertsConfig, partitions: Sequence[Mapping[str, Any]], unread_error: str | None
) -> LagCheck:
    """The limits `partitions` (status.partition_status rows with status.oldest_unread's ages)
    pass: per partition, then the pipeline's total lag and its oldest unread age."""
    passed: list[LimitPassed] = []
    rows, total, ages, unknown = [], 0, [], []
    for p in partitions:
        where = f"{p['topic']}[{p['partition']}]"
        lag, age = max(p["lag"] or 0, 0), p.get("oldest_unread_age_s")
        total += lag
        if age is not None:
            ages.append(age)
        if p.get("oldest_unread_unknown"):
            unknown.append(where)
        mine = []
        if limits.max_lag_records is not None and lag > limits.max_lag_records:
            mine.append(LimitPassed(RECORDS, where, lag, limits.max_lag_records))
        if limits.max_lag_seconds is not None and age is not None and age > limits.max_lag_seconds:
            mine.append(LimitPassed(SECONDS, where, age, limits.max_lag_seconds))
        passed += mine
        rows.append({
            "topic": p["topic"], "partition": p["partition"], "lag": p["lag"],
            "oldest_unread_age_s": age, "passed": [m.limit for m in mine],
        })  # fmt: skip
    oldest = max(ages) if ages else None
    if limits.max_lag_records is not None and total > limits.max_lag_records:
        passed.append(LimitPassed(RECORDS, "total", total, limits.max_lag_records))
    if limits.max_lag_seconds is not None and oldest is not None and oldest > limits.max_lag_seconds:
        passed.append(LimitPassed(SECONDS, "total", oldest, limits.max_lag_seconds))
    why = None
    if unknown and limits.max_lag_seconds is not None:
        why = f"the oldest unread record of {', '.join(unknown)} was not read: {unread_error or 'no reason given'}"
    return LagCheck(pipeline, limits, total, oldest, rows, tuple(passed), why)


def check_lag(
    config: PipelineConfig,
    store: ControlStore,
    limits: AlertsConfig,
    *,
    read_offsets: Callable[[], list[PartitionOffsets]] | None = None,
    read_timestamps: Callable[[Mapping[tuple[str, int], int]], Mapping[tuple[str, int], int | None]]
    | None = None,
    now: datetime | None = None,
) -> LagCheck:
    """Read the lag as service/status.py does (offsets with the planner's retries: a broker that does not
    answer raises KafkaUnavailableError) and evaluate `limits`. `read_offsets` and `read_timestamps`
    replace the Kafka reads (as in status.pipeline_status).

    A check whose age limit could not be checked, and passes no limit otherwise, raises
    LagUnknownError (retriable): silence is not a fresh pipeline. Every check whose offsets were
    read records them as a sample of the pipeline's lag history (trends.record_check), first."""
    committed = store.committed_offsets(config.name)
    offsets = (read_offsets or (lambda: fetch_partition_offsets(config.kafka_settings, config.topics)))()
    partitions = status.partition_status(committed, offsets, config.start_from)
    unread_error = status.oldest_unread(config, partitions, read_timestamps, now or datetime.now(UTC))
    result = evaluate(config.name, limits, partitions, unread_error)
    stale = stale_batches(config.name, store.planned_batches(config.name), now=now)
    result = replace(result, stale=tuple(stale))
    # Before any verdict: an unknown age is a gap in the age's history, the lag is still a sample.
    trends.record_check(config.name, store, partitions)
    if result.unknown and not result.failed:
        raise LagUnknownError(f"pipeline {config.name}: {result.unknown}; run the check again")
    return result

"""Backfill: ingest again an explicit offset range, or a time window, of some partitions.

A backfill batch re-reads ranges that scheduled batches already committed and replaces them in
the output (the same Delta replace over the same identities), so the table keeps exactly one copy
of each record; ``commit_batch`` never moves committed offsets for it. Its ranges must lie inside
``[log_start, committed_offset)`` of each partition. Every check runs before anything
is written: a refused request leaves no batch row and starts no Spark job.

``parse_request`` and ``check_ranges`` are pure (params in, ranges or BackfillRangeError out);
``plan_backfill`` fetches the offsets they need, and ``create_backfill`` records the batch. The
Airflow backfill DAG and ``eos-ingest backfill`` share them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.store import Batch, BatchKind, BatchStatus, ControlStore
from eos_ingest.errors import BackfillRangeError, BatchStateError
from eos_ingest.kafka.offsets import fetch_snapshot, offsets_for_time
from eos_ingest.plan.identity import KafkaIdentity, check_identities
from eos_ingest.plan.ranges import PlannedRange

# The keys of a request, as the DAG's trigger form and the CLI name them.
PARAM_KEYS = ("topic", "partitions", "start_offset", "end_offset", "start_time", "end_time", "reason")


@dataclass(frozen=True)
class BackfillRequest:
    """What to backfill: offsets ``[start_offset, end_offset)`` or times ``[start_time, end_time)``
    of some partitions of one topic, and why."""

    topic: str
    partitions: tuple[int, ...]
    reason: str
    start_offset: int | None = None
    end_offset: int | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None

    @property
    def by_time(self) -> bool:
        """True for a time window, False for an offset range."""
        return self.start_time is not None

    def describe(self) -> str:
        """One line naming the topic, the partitions and the range, for notes and messages."""
        parts = ",".join(str(p) for p in self.partitions)
        if self.by_time:
            assert self.start_time is not None and self.end_time is not None
            window = f"times [{self.start_time.isoformat()}, {self.end_time.isoformat()})"
        else:
            window = f"offsets [{self.start_offset}, {self.end_offset})"
        return f"topic {self.topic!r} partitions {parts} {window}"


def parse_time(value: Any, key: str) -> datetime:
    """An ISO-8601 timestamp as an aware UTC datetime; one without an offset is taken as UTC."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str) and value.strip():
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise BackfillRangeError(
                f"{key} = {value!r} is not an ISO-8601 timestamp; write e.g. 2026-11-22T10:00:00Z"
            ) from None
    else:
        raise BackfillRangeError(f"{key} = {value!r} is not an ISO-8601 timestamp")
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _int_or_none(value: Any, key: str, problems: list[str]) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        problems.append(f"{key} = {value!r} is not an offset; give a whole number >= 0")
        return None
    return value


def _partitions(value: Any, problems: list[str]) -> tuple[int, ...]:
    if isinstance(value, str):  # the CLI's "0,1,2"
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list | tuple) or not value:
        problems.append(f"partitions = {value!r}: give a non-empty list of partition numbers, e.g. [0, 1]")
        return ()
    out: list[int] = []
    for item in value:
        number = int(item) if isinstance(item, str) and item.isdigit() else item
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            problems.append(f"partitions: {item!r} is not a partition number (a whole number >= 0)")
        elif number in out:
            problems.append(f"partitions: {number} is listed twice; list each partition once")
        else:
            out.append(number)
    return tuple(sorted(out))


def parse_request(params: Mapping[str, Any], topics: Sequence[str]) -> BackfillRequest:
    """Validate the trigger form's params (or the CLI's arguments) without any I/O.

    Exactly one of the pairs start_offset/end_offset and start_time/end_time must be given, both
    of its halves, with start < end. Every problem is listed in one BackfillRangeError.
    """
    problems: list[str] = []
    unknown = sorted(set(params) - set(PARAM_KEYS))
    if unknown:
        problems.append(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(PARAM_KEYS)}")
    topic = params.get("topic")
    if topic not in topics:
        problems.append(
            f"topic = {topic!r} is not a topic of this pipeline; choose one of {', '.join(topics)}"
        )
    partitions = _partitions(params.get("partitions"), problems)
    reason = params.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        problems.append("reason is empty; say why the backfill is needed (it is kept on the batch)")
    start = _int_or_none(params.get("start_offset"), "start_offset", problems)
    end = _int_or_none(params.get("end_offset"), "end_offset", problems)
    start_time = end_time = None
    has_offsets = params.get("start_offset") not in (None, "") or params.get("end_offset") not in (None, "")
    has_times = bool(params.get("start_time")) or bool(params.get("end_time"))
    if has_offsets and has_times:
        problems.append("give start_offset/end_offset OR start_time/end_time, not both")
    elif not has_offsets and not has_times:
        problems.append("give a range: start_offset and end_offset, or start_time and end_time")
    elif has_offsets and (params.get("start_offset") in (None, "") or params.get("end_offset") in (None, "")):
        problems.append("give both start_offset and end_offset (end is exclusive)")
    elif start is not None and end is not None and start >= end:
        problems.append(
            f"offset range [{start}, {end}) of topic {topic!r} partitions {list(partitions)} is "
            f"{'empty' if start == end else 'reversed'}; choose start_offset < end_offset (the end is exclusive)"
        )
    elif has_times:
        try:
            start_time = parse_time(params.get("start_time"), "start_time")
            end_time = parse_time(params.get("end_time"), "end_time")
        except BackfillRangeError as exc:
            problems.append(str(exc))
        if start_time and end_time and start_time >= end_time:
            problems.append(
                f"time window [{start_time.isoformat()}, {end_time.isoformat()}) of topic {topic!r} "
                f"partitions {list(partitions)} is empty or reversed; choose start_time < end_time"
            )
    if problems:
        raise BackfillRangeError("backfill refused before any work:\n  - " + "\n  - ".join(problems))
    assert isinstance(topic, str) and isinstance(reason, str)
    return BackfillRequest(topic, partitions, reason.strip(), start, end, start_time, end_time)


def check_ranges(
    pipeline: str,
    request: BackfillRequest,
    wanted: Mapping[int, tuple[int, int]],
    *,
    committed: Mapping[int, int],
    log_starts: Mapping[int, int],
) -> list[PlannedRange]:
    """The ranges to backfill, or BackfillRangeError naming every partition that is refused.

    `wanted` maps each requested partition to its ``(start, end)`` offsets; `committed` and
    `log_starts` map the topic's partitions to the pipeline's committed offset and Kafka's log
    start. A range must be non-empty and inside ``[log_start, committed)``. In a time window, a
    partition with no records in the window is left out (the request is refused when none has any).
    """
    problems: list[str] = []
    ranges: list[PlannedRange] = []
    topic = request.topic
    for partition in request.partitions:
        where = f"topic {topic!r} partition {partition}"
        if partition not in log_starts:
            known = ", ".join(str(p) for p in sorted(log_starts)) or "none"
            problems.append(f"{where} does not exist (partitions: {known}); remove it from partitions")
            continue
        if partition not in committed:
            problems.append(
                f"{where}: the pipeline has not ingested this partition yet, so there is nothing to "
                "backfill; run the ingest DAG first"
            )
            continue
        start, end = wanted[partition]
        limit, log_start = committed[partition], log_starts[partition]
        span = f"{where} range [{start}, {end})"
        if start > end:
            problems.append(f"{span} is reversed (start > end); swap start and end")
        elif start == end and not request.by_time:
            problems.append(f"{span} is empty (the end is exclusive); choose end_offset > start_offset")
        elif start == end:
            continue  # no record of this partition falls in the time window
        elif end > limit:
            problems.append(
                f"{span} goes beyond the committed offset {limit}: offsets from {limit} on have not been "
                f"ingested yet and belong to the next scheduled batch; choose an end <= {limit}"
            )
        elif start < log_start:
            problems.append(
                f"{span} starts below the log start {log_start}: Kafka deleted those records "
                f"(retention), so they cannot be read again; choose a start >= {log_start}"
            )
        else:
            ranges.append(PlannedRange(topic, partition, start, end))
    if not problems and not ranges:
        problems.append(f"no records of {request.describe()} lie in the window; widen the time window")
    if problems:
        raise BackfillRangeError(
            f"backfill of pipeline {pipeline!r} refused, nothing was written ({request.describe()}):\n  - "
            + "\n  - ".join(problems)
        )
    return ranges


def _epoch_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def plan_backfill(
    config: PipelineConfig, store: ControlStore, request: BackfillRequest
) -> list[PlannedRange]:
    """Fetch the offsets the checks need (committed, log start, offsets of the times) and check."""
    return _plan_backfill(config, store, request)[0]


def _plan_backfill(
    config: PipelineConfig, store: ControlStore, request: BackfillRequest
) -> tuple[list[PlannedRange], KafkaIdentity]:
    snapshot = fetch_snapshot(config.kafka_settings, [request.topic])
    # A recreated topic or another cluster is refused before the range checks, whose offsets
    # would belong to another log (the store checks again when it records the batch).
    check_identities(config.name, store.recorded_identities(config.name), snapshot.identity, [request.topic])
    committed = {
        tp.partition: offset
        for tp, offset in store.committed_offsets(config.name).items()
        if tp.topic == request.topic
    }
    log_starts = {o.partition: o.log_start for o in snapshot.offsets}
    present = [p for p in request.partitions if p in log_starts]
    if request.by_time and present:
        assert request.start_time is not None and request.end_time is not None
        starts = offsets_for_time(
            config.kafka_settings, request.topic, present, _epoch_ms(request.start_time)
        )
        ends = offsets_for_time(config.kafka_settings, request.topic, present, _epoch_ms(request.end_time))
        wanted = {p: (starts[p], ends[p]) for p in present}
    else:
        assert request.start_offset is not None and request.end_offset is not None
        wanted = {p: (request.start_offset, request.end_offset) for p in present}
    ranges = check_ranges(config.name, request, wanted, committed=committed, log_starts=log_starts)
    return ranges, snapshot.identity


def create_backfill(
    config: PipelineConfig,
    store: ControlStore,
    request: BackfillRequest,
    *,
    airflow_run_id: str | None = None,
) -> Batch:
    """Check the request and record a planned backfill batch; nothing is written when refused.

    With an `airflow_run_id`, a backfill batch that run already recorded is returned unchanged, so
    a retry of the recording task does not leave a second, never-run batch behind.
    """
    if airflow_run_id is not None:
        earlier = store.backfill_of_run(config.name, airflow_run_id)
        if earlier is not None:
            return earlier
    ranges, identity = _plan_backfill(config, store, request)
    note = f"backfill: {request.reason} ({request.describe()})"
    return store.create_backfill(
        config.name, ranges, reason=note, airflow_run_id=airflow_run_id, identity=identity
    )


def resumable_backfill(config: PipelineConfig, store: ControlStore, batch_id: int) -> Batch:
    """The planned backfill `batch_id` of this pipeline, to run again under a new fence (the job's
    run_fenced takes it), as `eos-ingest run` resumes the pending scheduled batch. Anything else is
    refused with BatchStateError, one line naming the batch and the way out, before any fence."""
    try:
        batch = store.get_batch(batch_id)
    except BatchStateError:
        raise BatchStateError(
            f"batch {batch_id} does not exist in the control DB of pipeline {config.name!r}: nothing was "
            f"done; its planned backfills are listed by `eos-ingest status --pipeline {config.name}`"
        ) from None
    batch = store.get_pipeline_batch(config.name, batch_id)  # never another pipeline's ranges
    if batch.kind is not BatchKind.BACKFILL:
        raise BatchStateError(
            f"batch {batch_id} is a scheduled batch of pipeline {config.name!r}, not a backfill: "
            f"`eos-ingest run --pipeline {config.name}` resumes it while it is planned"
        )
    if batch.status is not BatchStatus.PLANNED:
        raise BatchStateError(
            f"batch {batch_id} is {batch.status.value}, not planned: nothing to resume; to ingest its "
            f"ranges again record a new one with `eos-ingest backfill --pipeline {config.name} "
            "--topic ... --partitions ... --start-offset ... --end-offset ... --reason ...`"
        )
    return batch

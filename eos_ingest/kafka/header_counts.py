"""Committed records in offset spans, counted from Kafka's record-batch headers, not the records.

The gate's independent count (kafka/committed_counts.py) used to decode every record into a Python
object: about 7 s of a core per 1M records, on a machine whose cores Spark's read needs. A v2
record batch says in its header how many records it holds (recordsCount), which offsets it spans
(baseOffset, lastOffsetDelta), whether it is transactional or a control batch, and which producer
wrote it. So this reads raw batches (Fetch, isolation_level=read_committed, through kafka-python's
protocol code; nothing of the Spark job's read) and counts them from their headers
(kafka/record_batches.py):

* control batches (transaction markers) hold no data records: skipped;
* a transactional batch of an aborted transaction is skipped the way the Java consumer skips it:
  the fetch response lists the aborted transactions (producer id, first offset) in the fetched
  range; a producer id is aborted from its first offset until its ABORT marker;
* a batch inside the span counts recordsCount, without decompression (the header lies outside
  the compressed payload); a batch across a span edge counts by offset: from base and last offset
  when its offsets are contiguous (every topic that is not compacted), else by decoding that one
  batch's records.

Memory: one fetch response at a time (bounded per partition), and a counter per partition.

A door into kafka-python's internals: its protocol classes (FetchRequest, MemoryRecords and the
batches' header fields) and its connection manager and event loop (kafka.net), which its public
consumer wraps and does not offer. Figure: CPU of the gate's count of 950,000 committed records
(`python -m bench.recount`, the benchmark's workload): ~7 s decoded record by record, 0.5-0.6 s
from the headers (bench/HISTORY.md). Here, on 60,000 committed records of 100 B in one transaction
over 3 partitions (test_header_counts' CPU test), 5 runs alternated on a loaded 2-core machine:
0.027 s of CPU from the headers against 0.165 s decoded (medians; 0.08-0.20 s from run to run).
Gate: HEADERS_ON, on the kafka-python series this was written against and tested on
(KNOWN_SERIES, pyproject's pin); on any other, count_from_headers raises NeedsTheConsumer at once,
and the caller counts with librdkafka's consumer (committed_counts.count_by_records), as for a
setting kafka-python cannot honour. Exit: that consumer is the public way; when
test_header_counts' precondition test finds it no longer costs several times the CPU of the
headers, this module goes and the count is count_by_records alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kafka.errors as kafka_errors
from kafka.net.selector import NetworkSelector
from kafka.protocol.consumer import FetchRequest
from kafka.structs import TopicPartition

from eos_ingest.errors import KafkaAccessError
from eos_ingest.kafka.python_net import KAFKA_PYTHON_VERSION, ConnectionManager
from eos_ingest.kafka.record_batches import NeedsTheConsumer, count_fetched

Spans = Mapping[tuple[str, int], Sequence[tuple[int, int]]]

# kafka-python logs every failed connect at ERROR; a broker that does not answer is reported once,
# by the caller's KafkaUnavailableError, as for librdkafka's log (kafka/admin.py, QuietLibrdkafkaLog).
# Its lines go to _RefusalWatch only, never on to the application's handlers.
_KAFKA_LOG = logging.getLogger("kafka")
_KAFKA_LOG.propagate = False
_KAFKA_LOG.setLevel(logging.WARNING)

# The kafka-python series whose protocol classes and kafka.net this was written against.
KNOWN_SERIES = (3, 0)
HEADERS_ON = KAFKA_PYTHON_VERSION[:2] == KNOWN_SERIES

_READ_COMMITTED = 1
# Fetch v4 brought read_committed; v13 replaced topic names by topic ids, which this does not need.
_FETCH_VERSIONS = (4, 12)
# The broker answers a fetch at the end of the log after this long; a count ends there.
_MAX_WAIT_MS = 50
# Per partition and in all, per fetch: memory stays O(partitions), and a response carries many
# batches (2 MiB is about 10,000 records of 200 B). The broker returns a larger first batch whole.
_PARTITION_BYTES = 2 << 20
_FETCH_BYTES = 32 << 20
# After a transient failure (no leader yet, a connection refused), before the next try.
_RETRY_PAUSE_S = 0.2
_BOOTSTRAP_TRY_MS = 5000


class _RefusalWatch(logging.Handler):
    """Remembers a refused login that kafka-python's bootstrap only logs (it retries it until its
    deadline, then reports a time-out), so the count can say "refused" at once, not "no answer"."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()  # the count's event loop runs on its caller's thread
        self.refusal: Exception | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread or self.refusal is not None or not isinstance(record.args, tuple):
            return
        for arg in record.args:
            if isinstance(arg, kafka_errors.SaslAuthenticationFailedError | kafka_errors.AuthorizationError):
                self.refusal = arg


@dataclass
class _Interval:
    position: int
    end: int


def count_from_headers(
    config: Mapping[str, Any], spans: Spans, timeout_s: float
) -> dict[tuple[str, int], int]:
    """Per partition, the committed records `spans` hold (end exclusive), read with kafka-python
    options `config` (kafka_python_settings). Every partition is fetched at once, one request per
    leader. TimeoutError when no partition made progress for `timeout_s`; kafka-python's errors
    otherwise (the caller sorts transient from fatal); NeedsTheConsumer outside the gate."""
    if not HEADERS_ON:
        version = ".".join(map(str, KAFKA_PYTHON_VERSION))
        raise NeedsTheConsumer(f"kafka-python {version}: the header count is tested on 3.0.x only")
    counts = {tp: 0 for tp in spans}
    todo = {tp: deque(sorted((s, e) for s, e in intervals if e > s)) for tp, intervals in spans.items()}
    current = {tp: _Interval(*queue.popleft()) for tp, queue in todo.items() if queue}
    if not current:
        return counts
    # kafka-python refuses a response above 1 MB by default; a fetch's answer is up to
    # _FETCH_BYTES, plus one larger first batch (the broker's message.max.bytes, 1 MiB by default).
    config = {"receive_message_max_bytes": _FETCH_BYTES + (8 << 20), **config}
    net = NetworkSelector(**config)
    manager = ConnectionManager(net, **config)
    watch = _RefusalWatch()
    _KAFKA_LOG.addHandler(watch)
    try:
        net.run(_Fetching(manager, watch, counts, todo, current, timeout_s).run)
    finally:
        _KAFKA_LOG.removeHandler(watch)
        manager.close()
        net.close()
    return counts


@dataclass
class _Fetching:
    manager: ConnectionManager
    watch: _RefusalWatch
    counts: dict[tuple[str, int], int]
    todo: dict[tuple[str, int], deque[tuple[int, int]]]
    current: dict[tuple[str, int], _Interval]
    timeout_s: float

    deadline: float = 0.0
    last_error: Exception | None = None

    async def run(self) -> None:
        self.deadline = time.monotonic() + self.timeout_s
        await self._bootstrap()
        rounds = 0
        while self.current:
            rounds += 1
            try:
                progressed = await self._fetch_round(rounds)
            except kafka_errors.KafkaError as exc:
                if not exc.retriable:
                    raise
                progressed, self.last_error = False, exc
            if progressed:
                self.deadline = time.monotonic() + self.timeout_s
                continue
            if time.monotonic() > self.deadline:
                raise TimeoutError(self._no_answer())
            await self.manager._net.sleep(_RETRY_PAUSE_S)
            await self._refresh_metadata()

    async def _bootstrap(self) -> None:
        """Connect and read the topics' metadata, in short tries: a refused login ends it at once."""
        while True:
            left_ms = int((self.deadline - time.monotonic()) * 1000)
            try:
                await self.manager.bootstrap_async(timeout_ms=max(min(left_ms, _BOOTSTRAP_TRY_MS), 1))
                self.manager.cluster.set_topics({t for t, _ in self.current})
                await self.manager.cluster.refresh_metadata()
                return
            except kafka_errors.KafkaError as exc:
                if not exc.retriable:
                    raise
                self.last_error = exc
            if self.watch.refusal is not None:
                raise self.watch.refusal
            if time.monotonic() > self.deadline:
                raise TimeoutError(self._no_answer())

    def _no_answer(self) -> str:
        waiting = ", ".join(f"{t}[{p}] [{i.position}, {i.end})" for (t, p), i in sorted(self.current.items()))
        cause = f" (last error: {self.last_error})" if self.last_error else ""
        return f"no answer within {self.timeout_s}s counting committed records of {waiting}{cause}"

    async def _refresh_metadata(self) -> None:
        try:
            await self.manager.cluster.refresh_metadata()
        except kafka_errors.KafkaError as exc:
            if not exc.retriable:
                raise
            self.last_error = exc

    async def _fetch_round(self, rounds: int) -> bool:
        """One fetch per leader of every partition still counting; True if any moved on."""
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in self.current:
            leader = self.manager.cluster.leader_for_partition(TopicPartition(*tp))
            if leader is None or leader < 0:
                self.last_error = kafka_errors.LeaderNotAvailableError(
                    f"no leader known for {tp[0]}[{tp[1]}]"
                )
                self.manager.cluster.request_update()
                continue
            by_leader.setdefault(leader, []).append(tp)
        sent = []
        for leader, tps in by_leader.items():
            # Rotated each round: a broker that fills the byte limit with the first partitions
            # still serves the others next time.
            shift = rounds % len(tps)
            sent.append(self.manager.send(self._request(tps[shift:] + tps[:shift]), node_id=leader))
        progressed = False
        for future in sent:
            response = await future
            for topic in response.responses:
                for data in topic.partitions:
                    progressed |= self._take((topic.topic, data.partition_index), data)
        return progressed

    def _request(self, tps: list[tuple[str, int]]) -> FetchRequest:
        topics: dict[str, list[Any]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(
                FetchRequest.FetchTopic.FetchPartition(
                    partition=p,
                    current_leader_epoch=-1,
                    fetch_offset=self.current[(t, p)].position,
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=_PARTITION_BYTES,
                )
            )
        return FetchRequest(
            replica_id=-1,
            max_wait_ms=_MAX_WAIT_MS,
            min_bytes=1,
            max_bytes=_FETCH_BYTES,
            isolation_level=_READ_COMMITTED,
            session_id=0,
            session_epoch=-1,  # no fetch session: every request names its partitions
            topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
            forgotten_topics_data=[],
            rack_id="",
            min_version=_FETCH_VERSIONS[0],
            max_version=_FETCH_VERSIONS[1],
        )

    def _take(self, tp: tuple[str, int], data: Any) -> bool:
        """Count one partition's part of a response; True if its position moved or it is done."""
        interval = self.current.get(tp)
        if interval is None:
            return False
        error = kafka_errors.for_code(data.error_code)
        if error is not kafka_errors.NoError:
            if issubclass(error, kafka_errors.AuthorizationError):
                raise KafkaAccessError(
                    f"Kafka refused to let this client read {tp[0]}[{tp[1]}] ({error.__name__}); "
                    "grant it read access to the topic"
                )
            if error.retriable:  # a moved leader, a restarting broker: fetched again after a refresh
                self.last_error = error(f"fetching {tp[0]}[{tp[1]}] from {interval.position}")
                self.manager.cluster.request_update()
                return False
            raise RuntimeError(f"counting {tp[0]}[{tp[1]}] from {interval.position}: {error.__name__}")
        aborted = [(a.producer_id, a.first_offset) for a in data.aborted_transactions or ()]
        count, next_offset = count_fetched(data.records or b"", aborted, interval.position, interval.end)
        self.counts[tp] += count
        moved = next_offset > interval.position
        interval.position = next_offset
        # Done at the span's end, or at the committed log's end (the LSO) below it, as the
        # record-decoding consumer's end-of-partition event.
        if interval.position >= interval.end or (not moved and interval.position >= data.last_stable_offset):
            self._next_interval(tp)
            return True
        return moved

    def _next_interval(self, tp: tuple[str, int]) -> None:
        queue = self.todo[tp]
        if queue:
            self.current[tp] = _Interval(*queue.popleft())
        else:
            del self.current[tp]

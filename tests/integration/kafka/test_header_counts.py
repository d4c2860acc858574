"""The gate's count from record-batch headers, on real bytes from the real broker.

Each test produces transactions (committed and aborted, by producers whose batches interleave,
compressed or not) and counts the same spans twice: from the batch headers (kafka/header_counts.py)
and record by record with librdkafka's read_committed consumer (the count as it was). They must
agree, and equal the committed records the test produced.
"""

from __future__ import annotations

import logging
import random
import statistics
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from eos_ingest.errors import KafkaAccessError
from eos_ingest.kafka.committed_counts import count_by_records, read_committed_counts
from eos_ingest.kafka.header_counts import count_from_headers
from eos_ingest.kafka.python_settings import kafka_python_config
from tests.helpers.kafka import stable_end, watermarks

pytestmark = pytest.mark.integration

# The CPU test's committed records (one transaction, 100-byte values, 3 partitions), and how many
# times less CPU the headers must cost than decoding every record: measured 6.2x here (medians of 5,
# 0.027 against 0.165 s; the decoded count took 0.08-0.20 s from run to run on a loaded machine).
CPU_RECORDS = 60_000
HEADERS_CPU_SHARE = 2


def producer(bootstrap: str, compression: str = "none", extra: dict[str, str] | None = None) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"test-{uuid.uuid4().hex}",
            "compression.type": compression,
            "linger.ms": 5,
            **(extra or {}),
        }
    )
    p.init_transactions(30)
    return p


def interleaved(
    bootstrap: str, topic: str, partitions: int, compression: str, rounds: int = 4, per_flush: int = 40
) -> dict[int, int]:
    """Two producers write transactions side by side, flushing in turn so that their batches
    interleave on each partition; `a` aborts every other transaction, `b` commits all. Returns the
    committed records per partition."""
    a, b = producer(bootstrap, compression), producer(bootstrap, compression)
    committed = dict.fromkeys(range(partitions), 0)
    for n in range(rounds):
        a.begin_transaction()
        b.begin_transaction()
        written = dict.fromkeys(range(partitions), 0)
        for chunk in range(3):
            for who in (a, b):
                for i in range(per_flush):
                    who.produce(topic, f"r{n}-{chunk}-{i}".encode() * 8, partition=i % partitions)
                who.flush(30)  # one batch per partition and flush: the two producers alternate
            for i in range(per_flush):
                written[i % partitions] += 1
        abort_a = n % 2 == 1
        if abort_a:
            a.abort_transaction(30)
        else:
            a.commit_transaction(30)
        b.commit_transaction(30)
        for p, k in written.items():
            committed[p] += k * (1 if abort_a else 2)
    return committed


def both_counts(settings: dict[str, str], spans: dict[tuple[str, int], list[tuple[int, int]]]) -> dict:
    by_headers = count_from_headers(kafka_python_config(settings), spans, timeout_s=30)
    by_records = count_by_records(settings, spans, timeout_s=30)
    assert by_headers == by_records, spans
    return by_headers


@pytest.mark.parametrize("compression", ["none", "gzip", "zstd", "lz4", "snappy"])
def test_header_count_equals_the_record_count_on_interleaved_transactions(
    kafka_bootstrap: str, make_topic: Callable[..., str], compression: str
) -> None:
    # lz4 and snappy have no codec in this venv: the headers count them without decompression.
    topic = make_topic(partitions=3)
    committed = interleaved(kafka_bootstrap, topic, 3, compression)
    settings = {"bootstrap.servers": kafka_bootstrap}
    ends = {p: stable_end(kafka_bootstrap, topic, p) for p in range(3)}
    whole = {(topic, p): [(0, ends[p])] for p in range(3)}

    assert both_counts(settings, whole) == {(topic, p): committed[p] for p in range(3)}
    # Spans that start and end inside batches (a batch holds ~13 records here), several per
    # partition, on every partition at once.
    rng = random.Random(f"{compression}-spans")
    for _ in range(6):
        spans = {}
        for p in range(3):
            cuts = sorted(rng.sample(range(ends[p] + 1), 4))
            spans[(topic, p)] = [(cuts[0], cuts[1]), (cuts[2], cuts[3])]
        both_counts(settings, spans)


def test_aborted_transactions_are_not_counted(kafka_bootstrap: str, make_topic: Callable[..., str]) -> None:
    """Fails if the aborted batches were counted: 80 aborted records lie between the committed ones,
    written by one producer while another's committed transaction was open beside it."""
    topic = make_topic(partitions=1)
    a, b = producer(kafka_bootstrap), producer(kafka_bootstrap)
    a.begin_transaction()
    b.begin_transaction()
    for round_ in range(4):
        for who, tag in ((a, "aborted"), (b, "committed")):
            for i in range(20):
                who.produce(topic, f"{tag}-{round_}-{i}".encode(), partition=0)
            who.flush(30)
    a.abort_transaction(30)
    b.commit_transaction(30)
    a.begin_transaction()
    for i in range(10):
        a.produce(topic, f"after-{i}".encode(), partition=0)
    a.commit_transaction(30)
    end = stable_end(kafka_bootstrap, topic, 0)
    assert end == 80 + 80 + 10 + 3  # records, two ABORT/COMMIT markers of the first pair, one more

    counts = read_committed_counts({"bootstrap.servers": kafka_bootstrap}, {(topic, 0): [(0, end)]})

    assert counts == {(topic, 0): 90}
    assert both_counts({"bootstrap.servers": kafka_bootstrap}, {(topic, 0): [(0, end)]})[(topic, 0)] == 90


def test_a_span_inside_one_batch_counts_its_offsets(
    kafka_bootstrap: str, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(partitions=1)
    p = producer(kafka_bootstrap, "zstd")
    p.begin_transaction()
    for i in range(50):
        p.produce(topic, f"v{i}".encode(), partition=0)
    p.commit_transaction(30)  # one batch: offsets 0-49, then the COMMIT marker at 50
    settings = {"bootstrap.servers": kafka_bootstrap}

    assert both_counts(settings, {(topic, 0): [(5, 13)]}) == {(topic, 0): 8}
    assert both_counts(settings, {(topic, 0): [(0, 1), (49, 51)]}) == {(topic, 0): 2}
    assert both_counts(settings, {(topic, 0): [(20, 20)]}) == {(topic, 0): 0}


def test_a_span_past_the_committed_end_stops_at_the_open_transaction(
    kafka_bootstrap: str, make_topic: Callable[..., str]
) -> None:
    """An open transaction holds the LSO back: the count ends there, as the consumer's does."""
    topic = make_topic(partitions=1)
    done, open_ = producer(kafka_bootstrap), producer(kafka_bootstrap)
    done.begin_transaction()
    for i in range(10):
        done.produce(topic, f"v{i}".encode(), partition=0)
    done.commit_transaction(30)
    open_.begin_transaction()
    for i in range(5):
        open_.produce(topic, f"open{i}".encode(), partition=0)
    open_.flush(30)
    try:
        high = watermarks(kafka_bootstrap, topic, 0, "read_uncommitted")[1]
        assert both_counts({"bootstrap.servers": kafka_bootstrap}, {(topic, 0): [(0, high)]}) == {
            (topic, 0): 10
        }
    finally:
        open_.abort_transaction(30)


def test_the_sasl_ssl_listener_is_counted_from_headers_with_every_user(
    kafka_bootstrap: str, kafka_sasl_ssl, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(partitions=2)
    committed = interleaved(kafka_bootstrap, topic, 2, "zstd", rounds=2)
    ends = {p: stable_end(kafka_bootstrap, topic, p) for p in range(2)}
    spans = {(topic, p): [(0, ends[p])] for p in range(2)}
    for user in kafka_sasl_ssl.users:
        settings = kafka_sasl_ssl.settings(user)
        assert kafka_python_config(settings)["sasl_mechanism"] == "SCRAM-SHA-512"
        assert both_counts(settings, spans) == {(topic, p): committed[p] for p in range(2)}


def test_a_wrong_password_is_an_access_error_not_a_retry(
    kafka_bootstrap: str, kafka_sasl_ssl, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(partitions=1)
    settings = kafka_sasl_ssl.settings("eos", password="not-the-password")
    with pytest.raises(KafkaAccessError, match=r"sasl\.password"):
        read_committed_counts(settings, {(topic, 0): [(0, 1)]}, timeout_s=10)


def test_a_setting_without_a_translation_counts_record_by_record(
    kafka_bootstrap: str, make_topic: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    topic = make_topic(partitions=1)
    committed = interleaved(kafka_bootstrap, topic, 1, "none", rounds=2)
    end = stable_end(kafka_bootstrap, topic, 0)
    settings = {"bootstrap.servers": kafka_bootstrap, "topic.metadata.refresh.interval.ms": "60000"}

    with caplog.at_level(logging.INFO, logger="eos_ingest.kafka.committed_counts"):
        counts = read_committed_counts(settings, {(topic, 0): [(0, end)]})

    assert counts == {(topic, 0): committed[0]}
    assert "record by record" in caplog.text and "topic.metadata.refresh.interval.ms" in caplog.text


def test_fetches_of_several_megabytes_are_read_whole(
    kafka_bootstrap: str, make_topic: Callable[..., str]
) -> None:
    """One fetch answers with up to 2 MiB per partition: above kafka-python's default 1 MB frame
    limit, which failed the count of the benchmark's 1M records."""
    topic = make_topic(partitions=3)
    p = producer(kafka_bootstrap, extra={"batch.size": "1000000"})
    p.begin_transaction()
    for i in range(4500):
        p.produce(topic, bytes(1000), partition=i % 3)
        p.poll(0)
    p.commit_transaction(30)
    spans = {(topic, q): [(0, stable_end(kafka_bootstrap, topic, q))] for q in range(3)}

    assert count_from_headers({"bootstrap_servers": [kafka_bootstrap]}, spans, timeout_s=30) == {
        (topic, q): 1500 for q in range(3)
    }


def _cpu_seconds(count: Callable[[], object]) -> float:
    """CPU time of this process (every thread: librdkafka's and kafka-python's too) for `count()`."""
    start = time.process_time()
    count()
    return time.process_time() - start


def test_the_header_count_still_costs_a_fraction_of_the_record_decoding_ones_cpu(
    kafka_bootstrap: str, make_topic: Callable[..., str]
) -> None:
    """The precondition of header_counts, a door into kafka-python's protocol classes: the headers
    count committed records for several times less CPU than librdkafka's consumer, which decodes
    every record into a message. CPU, not wall time: the machine is shared. When this fails, the
    consumer is about as cheap: count with it alone (count_by_records) and remove header_counts."""
    topic = make_topic(partitions=3)
    p = producer(kafka_bootstrap, extra={"batch.size": "1000000", "linger.ms": "20"})
    p.begin_transaction()
    for i in range(CPU_RECORDS):
        p.produce(topic, bytes(100), partition=i % 3)
        if i % 10_000 == 0:
            p.poll(0)
    p.commit_transaction(30)
    settings = {"bootstrap.servers": kafka_bootstrap}
    spans = {(topic, q): [(0, stable_end(kafka_bootstrap, topic, q))] for q in range(3)}
    expected = {(topic, q): CPU_RECORDS // 3 for q in range(3)}
    by_headers, by_records = [], []
    for _ in range(5):  # alternated, medians of 5
        by_headers.append(_cpu_seconds(lambda: count_from_headers(kafka_python_config(settings), spans, 30)))
        by_records.append(_cpu_seconds(lambda: count_by_records(settings, spans, timeout_s=30)))
    assert count_from_headers(kafka_python_config(settings), spans, 30) == expected
    headers, records = statistics.median(by_headers), statistics.median(by_records)
    assert headers * HEADERS_CPU_SHARE < records, f"headers {headers:.3f} s, records {records:.3f} s of CPU"

"""Network faults between the job and the broker, through Toxiproxy (tests/fixtures/toxiproxy.py):
added latency, a connection reset mid-fetch, a broker that accepts and never answers (a black hole)
during the plan, the Spark read, the independent count and verify, and a slow close.

Each step gives up within its bound with one clear line and the retriable exit 75, or completes
correctly after a transient fault; no partial range is ever committed; and once the fault is lifted
the next run commits, with 0 duplicates, 0 missing, 0 unexpected by verify and by a raw
read_committed rescan (tests/helpers/rescan.py). One topic and pipeline for the module, a batch of
new records per test, in the test's Spark session as the spark-submit job runs it (run_fenced).

On main (31a5b8a) the black hole during the Spark read failed: the read waited ~3 minutes and
ended in a Py4J traceback; the other faults were already handled there.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from eos_ingest import cli
from eos_ingest.batch.result import BatchResult
from eos_ingest.batch.sequence import run_fenced
from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.store import BatchStatus, ControlStore
from eos_ingest.errors import EXIT_RETRIABLE, EosIngestError, exit_code
from eos_ingest.kafka.committed_counts import read_committed_counts
from eos_ingest.service.operations import open_store, plan_batch
from tests.fixtures.pipelines import pending_scheduled_batch, verify_pipeline, write_pipeline
from tests.fixtures.toxiproxy import Toxiproxy
from tests.helpers.kafka import TxProducer
from tests.helpers.rescan import assert_each_committed_record_once

# The bounds the pipeline's Kafka clients are given (kafka.timeout_seconds), and the slack a loaded
# 2-core machine needs on top of them before a step counts as hung.
TIMEOUT_S = 10
SLACK_S = 30


@pytest.fixture(scope="module")
def pipeline(
    tmp_path_factory: pytest.TempPathFactory, kafka_admin: AdminClient, toxiproxy: Toxiproxy
) -> PipelineConfig:
    """A pipeline that reaches the broker only through the proxy, on a topic of its own."""
    folder = tmp_path_factory.mktemp("network_faults")
    topic = f"network_faults_{uuid.uuid4().hex[:8]}"
    kafka_admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(60)
    return write_pipeline(
        folder,
        toxiproxy.bootstrap,
        [topic],
        f"sqlite:///{folder / 'control.db'}",
        name="netfaults",
        kafka_timeout_seconds=TIMEOUT_S,
    )


@pytest.fixture
def produced(pipeline: PipelineConfig, kafka_bootstrap: str) -> int:
    """200 new committed records on the pipeline's topic, written past the proxy."""
    producer = TxProducer(kafka_bootstrap)
    producer.begin()
    producer.send(pipeline.topics[0], [{"id": i, "name": f"n{i}", "amount": 1.0} for i in range(200)])
    producer.commit()
    return 200


def _run(spark, config: PipelineConfig) -> BatchResult | None:
    """Plan (or resume) and run one batch in this process, as the spark-submit job does (run_fenced:
    its errors as the job reports them)."""
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    return None if batch is None else run_fenced(spark, config, store, batch)


def _store(config: PipelineConfig) -> ControlStore:
    return ControlStore(config.control_db_url)


def _assert_clean_after(spark, config: PipelineConfig) -> None:
    """The fault lifted: the next run commits the pending batch, and the tables hold each committed
    record once, by verify and by the raw rescan."""
    _run(spark, config)  # commits, or raises
    assert pending_scheduled_batch(_store(config), config.name) is None
    report = verify_pipeline(spark, config)
    assert (report.duplicates, report.missing, report.unexpected) == (0, 0, 0), report
    assert_each_committed_record_once(spark, config)


def _when_spark_reads(spark, act: Callable[[], None]) -> threading.Thread:
    """Runs `act` as soon as a Spark job is active (the batch's read of Kafka)."""

    def watch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if spark.sparkContext.statusTracker().getActiveJobsIds():
                act()
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_added_latency_the_batch_still_commits(spark, pipeline, produced, toxics: Toxiproxy) -> None:
    toxics.add("latency", latency=50, jitter=10)
    started = time.monotonic()
    result = _run(spark, pipeline)
    print(f"batch with 50 ms latency each way: {time.monotonic() - started:.1f} s")
    assert result is not None and result.records_read >= produced
    toxics.reset()
    _assert_clean_after(spark, pipeline)


def _command_into_black_hole(command: str, pipeline, toxics, capsys) -> tuple[int, str, float]:
    """`eos-ingest COMMAND` with every broker a black hole: its exit code, stderr and seconds."""
    toxics.add("timeout", timeout=0)
    started = time.monotonic()
    code = cli.main([command, "--config", str(pipeline.source)])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    print(f"{command} into a black hole: exit {code} after {elapsed:.1f} s: {err}")
    return code, err, elapsed


def test_black_hole_during_the_plan_exits_75_with_one_line(pipeline, produced, toxics, capsys) -> None:
    code, err, elapsed = _command_into_black_hole("plan", pipeline, toxics, capsys)
    assert code == EXIT_RETRIABLE, err
    assert len([line for line in err.splitlines() if line.strip()]) == 1, err
    assert elapsed < TIMEOUT_S * 3 + SLACK_S


def test_black_hole_during_the_spark_read_exits_75(spark, pipeline, produced, toxics) -> None:
    watcher = _when_spark_reads(spark, lambda: toxics.add("timeout", timeout=0))
    started = time.monotonic()
    with pytest.raises(EosIngestError) as raised:
        _run(spark, pipeline)
    elapsed = time.monotonic() - started
    watcher.join(1)
    print(f"Spark read into a black hole: {raised.value!r} after {elapsed:.1f} s")
    assert exit_code(raised.value) == EXIT_RETRIABLE
    assert "\n" not in str(raised.value) and "did not answer within 10 s" in str(raised.value)
    assert elapsed < TIMEOUT_S * 3 + SLACK_S
    batch = pending_scheduled_batch(_store(pipeline), pipeline.name)
    assert batch is not None and batch.status is BatchStatus.PLANNED  # nothing committed, retried as is
    toxics.reset()
    _assert_clean_after(spark, pipeline)


def test_black_hole_during_the_count_exits_75(pipeline, produced, toxics) -> None:
    end = produced
    toxics.add("timeout", timeout=0)
    started = time.monotonic()
    with pytest.raises(EosIngestError) as raised:
        read_committed_counts(pipeline.kafka_settings, {(pipeline.topics[0], 0): [(0, end)]}, TIMEOUT_S)
    print(f"count into a black hole: {raised.value!r} after {time.monotonic() - started:.1f} s")
    assert exit_code(raised.value) == EXIT_RETRIABLE


def test_black_hole_during_verify_exits_75(spark, pipeline, produced, toxics, capsys) -> None:
    _run(spark, pipeline)
    code, err, _ = _command_into_black_hole("verify", pipeline, toxics, capsys)
    assert code == EXIT_RETRIABLE, err


def test_reset_mid_fetch(spark, pipeline, produced, toxics) -> None:
    def reset_for_a_second() -> None:
        # Every connection is reset 100 ms after it carries data, then the network heals.
        name = toxics.add("reset_peer", timeout=100)
        time.sleep(1)
        toxics.remove(name)

    watcher = _when_spark_reads(spark, reset_for_a_second)
    started = time.monotonic()
    try:
        result: Any = _run(spark, pipeline)
    except EosIngestError as exc:
        result = exc
        assert exit_code(exc) == EXIT_RETRIABLE
    print(f"reset mid-fetch: {result!r} after {time.monotonic() - started:.1f} s")
    watcher.join(1)
    toxics.reset()
    _assert_clean_after(spark, pipeline)


def test_slow_close(spark, pipeline, produced, toxics) -> None:
    toxics.add("slow_close", delay=5000)
    started = time.monotonic()
    result = _run(spark, pipeline)
    print(f"slow close: {result!r} after {time.monotonic() - started:.1f} s")
    toxics.reset()
    _assert_clean_after(spark, pipeline)

"""Batches on a 3-node Kafka cluster (replication 3, min.insync.replicas 2) while its nodes fail
under them: the leader of a partition the batch reads, the coordinator of the transactional
producer writing beside it and the active controller are each SIGKILLed mid-batch and started
again seconds later; a partition's leader moves by a preferred-leader election mid-read, with no
node down. And bounded reads of a transactional topic whose partitions end on a commit marker and
on an abort marker (their last record a control record), where peers' Kafka sources hung.

Each time the batch commits, or fails retriably (exit 75) and stays planned, and the next run
commits it; then `verify` and an independent read_committed rescan (tests/helpers/rescan.py) find
every committed record of the committed ranges once: 0 duplicates, 0 missing, 0 unexpected.
The cluster, the Spark session and one pipeline are shared by the module; each fault adds the
writer's records to the same topic and the checks cover every batch so far. What `make test`
runs and what only EOS_LONG_TESTS=1 adds: at HOW below."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.store import BatchStatus
from eos_ingest.errors import EXIT_RETRIABLE, EosIngestError, exit_code
from eos_ingest.service.operations import open_store, plan_batch
from tests.fixtures.kafka_cluster import KafkaCluster
from tests.fixtures.pipelines import ingest_once, table_count, verify_pipeline, write_pipeline
from tests.helpers.kafka import TxProducer, read_committed
from tests.helpers.processes import AttemptInThread
from tests.helpers.rescan import assert_each_committed_record_once
from tests.helpers.tx_writer import TransactionsInBackground

PARTITIONS = 3
DOWN_S = 4  # how long a killed node stays down: longer than a leader election, shorter than a batch
INTO_BATCH_S = 1.5  # when the fault comes after the attempt started: its plan is done, its read on
LONG = os.environ.get("EOS_LONG_TESTS") == "1"


@pytest.fixture(scope="module")
def pipeline(kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> PipelineConfig:
    topic = f"failover_{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, PARTITIONS)
    folder = tmp_path_factory.mktemp("cluster")
    return write_pipeline(folder, kafka_cluster.bootstrap, [topic], f"sqlite:///{folder / 'control.db'}")


@pytest.fixture
def writer(kafka_cluster: KafkaCluster, pipeline: PipelineConfig) -> Iterator[TransactionsInBackground]:
    """A transactional producer writing to the pipeline's topic for the whole test; every replica
    in sync before and after the test: a second node down would leave a partition below
    min.insync.replicas, which is not the fault a test means."""
    kafka_cluster.replicas_in_sync(pipeline.topics[0])
    tx = TransactionsInBackground(kafka_cluster.bootstrap, pipeline.topics[0], PARTITIONS).start()
    tx.wait_for(transactions=6)
    yield tx
    tx.stop()
    kafka_cluster.replicas_in_sync(pipeline.topics[0])


def batch_through(spark, config: PipelineConfig, fault: Callable[[], None]) -> None:
    """Plans a batch, runs it in a thread, brings `fault` on it INTO_BATCH_S later; then the
    attempt committed, or failed retriably and left the batch planned for the next run."""
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None, "the writer's records gave the batch nothing to read"
    attempt = AttemptInThread(spark, config, store, batch)
    time.sleep(INTO_BATCH_S)
    fault()
    error = attempt.ended(300)
    status = store.get_batch(batch.batch_id).status
    print(f"batch {batch.batch_id}: {status.value}, {'exit 0' if error is None else repr(error)}")
    if error is None:
        assert status is BatchStatus.COMMITTED
        return
    assert isinstance(error, EosIngestError), f"not one of ours, so no retriable exit: {error!r}"
    assert exit_code(error) == EXIT_RETRIABLE, f"exit {exit_code(error)}: {error}"
    assert status is BatchStatus.PLANNED, status


def caught_up_exactly_once(spark, config: PipelineConfig) -> None:
    """Runs batches until none is left (the planned one first), then checks the end state twice."""
    for _ in range(10):
        if ingest_once(spark, config) is None:
            break
    else:
        pytest.fail("still batches to run after 10")
    store = open_store(config)
    assert all(b.status is BatchStatus.COMMITTED for b in store.list_batches(config.name, limit=1000))
    report = verify_pipeline(spark, config)
    assert report.ok and report.found == report.expected > 0, report.to_dict()
    assert_each_committed_record_once(spark, config)


# `make test` runs the SIGKILLs of a read partition's leader and of the writer's coordinator and
# both marker tests (one cluster start; the module's time is within its budget); the controller's
# SIGKILL, the preferred-leader election and every clean stop run with EOS_LONG_TESTS=1, and `make
# chaos CHAOS_BROKERS=3` kills leaders, coordinators and the controller in turn at full size.
long_only = pytest.mark.skipif(not LONG, reason="a long variant: EOS_LONG_TESTS=1")
HOW = [
    pytest.param("kill", id="sigkill"),
    pytest.param("stop", id="clean-stop", marks=long_only),
]


def down_and_up(cluster: KafkaCluster, node: int, how: str) -> None:
    """SIGKILL (how="kill") or a clean stop of `node`, and its start DOWN_S later."""
    cluster.stop(node) if how == "stop" else cluster.kill(node)
    time.sleep(DOWN_S)
    cluster.start(node)


@pytest.mark.parametrize("how", HOW)
def test_leader_of_a_read_partition_down(spark, kafka_cluster, pipeline, writer, how: str) -> None:
    leader = kafka_cluster.leader(pipeline.topics[0], 0)
    batch_through(spark, pipeline, lambda: down_and_up(kafka_cluster, leader, how))
    writer.stop()
    caught_up_exactly_once(spark, pipeline)


@pytest.mark.parametrize("how", HOW)
def test_transaction_coordinator_down(spark, kafka_cluster, pipeline, writer, how: str) -> None:
    coordinator = kafka_cluster.coordinator(writer.transactional_id)
    batch_through(spark, pipeline, lambda: down_and_up(kafka_cluster, coordinator, how))
    writer.stop()
    caught_up_exactly_once(spark, pipeline)


@long_only
@pytest.mark.parametrize("how", ["kill", "stop"])
def test_active_controller_down(spark, kafka_cluster, pipeline, writer, how: str) -> None:
    controller = kafka_cluster.active_controller()
    batch_through(spark, pipeline, lambda: down_and_up(kafka_cluster, controller, how))
    writer.stop()
    assert kafka_cluster.active_controller() != controller or how == "stop", "the quorum kept its dead leader"
    caught_up_exactly_once(spark, pipeline)


@long_only
def test_preferred_leader_election_mid_read(spark, kafka_cluster, pipeline, writer) -> None:
    topic = pipeline.topics[0]
    moved = away_from_preferred(kafka_cluster, topic)
    preferred = kafka_cluster.preferred_leader(topic, moved)
    batch_through(spark, pipeline, lambda: kafka_cluster.elect_preferred(topic, moved))
    assert kafka_cluster.leader(topic, moved) == preferred
    writer.stop()
    caught_up_exactly_once(spark, pipeline)


def away_from_preferred(cluster: KafkaCluster, topic: str) -> int:
    """A partition of `topic` led by another node than its preferred one: one the kills above left
    so (the cluster does not move leaders back by itself), else one moved by a clean stop."""
    for partition in range(PARTITIONS):
        if cluster.leader(topic, partition) != cluster.preferred_leader(topic, partition):
            return partition
    preferred = cluster.leader(topic, 1)
    cluster.stop(preferred)
    cluster.start(preferred)
    cluster.replicas_in_sync(topic)
    assert cluster.leader(topic, 1) != preferred
    return 1


def ends_on_markers(bootstrap: str, topic: str) -> None:
    """Partition 0 ends on a commit marker, partition 1 on an abort marker after a committed
    transaction: each partition's last offset is a control record."""
    producer = TxProducer(bootstrap)
    producer.transaction(
        topic, [{"id": i, "name": "c", "amount": 1.0} for i in range(40)], commit=True, partition=0
    )
    producer.transaction(
        topic, [{"id": i, "name": "c", "amount": 2.0} for i in range(30)], commit=True, partition=1
    )
    producer.transaction(
        topic, [{"id": i, "name": "a", "amount": 3.0} for i in range(20)], commit=False, partition=1
    )


def bounded_batch_on_markers(spark, config: PipelineConfig, bootstrap: str) -> None:
    """The batch ends each range on a marker; it must end (within 180 s) with the count right."""
    topic = config.topics[0]
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    assert {(r.partition, r.end) for r in batch.ranges} == {(0, 41), (1, 52)}, batch.ranges
    error = AttemptInThread(spark, config, store, batch).ended(180)  # on its markers, within 180 s
    assert error is None, f"the batch failed: {error!r}"
    assert table_count(spark, config) == len(read_committed(bootstrap, topic, 2)) == 70
    caught_up_exactly_once(spark, config)


def test_ranges_ending_on_markers_on_one_broker(spark, kafka_bootstrap, make_topic, tmp_path: Path) -> None:
    topic = make_topic(partitions=2)
    ends_on_markers(kafka_bootstrap, topic)
    config = write_pipeline(tmp_path, kafka_bootstrap, [topic], f"sqlite:///{tmp_path / 'control.db'}")
    bounded_batch_on_markers(spark, config, kafka_bootstrap)


def test_ranges_ending_on_markers_on_the_cluster(spark, kafka_cluster, tmp_path: Path) -> None:
    topic = f"markers_{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, 2)
    ends_on_markers(kafka_cluster.bootstrap, topic)
    config = write_pipeline(
        tmp_path, kafka_cluster.bootstrap, [topic], f"sqlite:///{tmp_path / 'control.db'}"
    )
    bounded_batch_on_markers(spark, config, kafka_cluster.bootstrap)

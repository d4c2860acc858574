"""PostgreSQL restarted in the middle of a batch's publish (issue 48, item 2): on an Iceberg
pipeline whose JDBC catalog is its PostgreSQL control DB, and on a Delta table on s3a whose commits
go through the control DB as Delta's commit coordinator (docs/object-storage.md).

The batch pauses at a fault point of its publish (its gate passed, the table's fast-forward of
main next; or the table published, the quarantine table's next); the test stops the server, for
good or briefly, and lets the batch go on. Whatever the publish then meets (a catalog connection
that the restart ended, a server that refuses connections), the batch is never `failed`: it
commits, or it stops retriably (exit 75) with its row in the control DB still planned, and the
rerun commits it. pyiceberg's scan (no Spark) counts one copy of each record in both tables.

On Delta the server stops after the coordinator's commit row reached it (the commit is decided,
the writer has no answer): a TCP proxy in front of the server keeps the row's answer from the
writer and ends its connection only once the server is back (`restart`: the coordinator's retry on
a new connection finds its own row, the batch commits) or while it is still down (`down`: the
coordinator's retry fails, exit 75, planned; the rerun completes the decided commit and replaces
the ranges over it). Each Delta job is an `eos-ingest run` process (the s3a jars and the
coordinator are on an s3a pipeline's classpath only); delta-rs, which does not know the
coordinator, counts one copy of each record.

The server is this module's own (tests/fixtures/own_postgres.py): the session's shared one serves
the other worker's tests. Real broker, Spark, Iceberg, Delta, s3proxy and PostgreSQL; on Iceberg
nothing stands between them, on Delta only the proxy (bench/tcp_fault_proxy.py, its `hold` fault).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from bench.tcp_fault_proxy import TcpFaultProxy, bound_text, carrying
from eos_ingest.batch.attempt import PAUSE_BEFORE_TABLE_COMMIT_ENV
from eos_ingest.batch.quarantine_replace import PAUSE_BEFORE_QUARANTINE_COMMIT_ENV
from eos_ingest.control.schema import BatchStatus
from eos_ingest.control.store import ControlStore
from eos_ingest.errors import EXIT_RETRIABLE, exit_code
from eos_ingest.service.operations import plan_batch
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from tests.fixtures.own_postgres import OwnPostgres, own_postgres
from tests.fixtures.pipelines import ingest_once
from tests.helpers.kafka import TxProducer
from tests.helpers.processes import AttemptInThread
from tests.helpers.rescan import (
    assert_each_committed_record_once,
    assert_exactly_the_committed_records,
    committed_ranges,
)
from tests.helpers.s3a import CLI, commit_entries, identities

pytestmark = pytest.mark.integration

GOOD, BAD = 10, 2
# How long the server stays down in the `down` case after the batch went on: longer than the
# publish takes to meet the refused connection, shorter than the store's retries below.
DOWN_S = 4.0
# The control store's tries while the server is down: its failure handling (fail_batch) gets
# through once the server is back, so a batch that would be marked failed is.
STORE_ATTEMPTS = 6
LONG_TESTS = os.environ.get("EOS_LONG_TESTS") == "1"


@pytest.fixture(scope="module")
def server() -> Iterator[OwnPostgres]:
    with own_postgres() as started:
        yield started


@pytest.fixture
def db_url(server: OwnPostgres) -> Iterator[str]:
    with server.database() as url:
        yield url


def produce(kafka_bootstrap: str, topic: str) -> None:
    """GOOD records that parse, then BAD that do not (offsets GOOD .. GOOD+BAD-1: the quarantine)."""
    values: list[str | dict] = [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(GOOD)]
    values += [f"not json {i}" for i in range(BAD)]
    TxProducer(kafka_bootstrap).transaction(topic, values, commit=True, partition=0)


def offsets_on_main(config, name: str) -> Counter[int]:
    """kafka_offset -> copies in the table `name` on main, scanned by pyiceberg from the catalog."""
    table = IcebergCatalog.of(config).pyiceberg().load_table(name)
    return Counter(table.scan(selected_fields=("kafka_offset",)).to_arrow()["kafka_offset"].to_pylist())


def run_with_the_server_stopped(spark, config, store, batch, server, pause: Path, how: str, monkeypatch):
    """run_fenced(batch) in a thread, paused at `pause`'s fault point; there the server stops.
    `restart`: started again before the batch goes on. `down`: the batch goes on while it is down,
    and it starts DOWN_S later. The error the attempt raised, or None."""
    attempt = AttemptInThread(spark, config, store, batch, pause)
    try:
        attempt.wait_for_pause()
        server.down()
        if how == "restart":
            server.up()
            attempt.go_on()
        else:
            attempt.go_on()
            attempt.join(DOWN_S)
            server.up()
    finally:
        attempt.go_on()
        server.up()
        attempt.join()
    assert not attempt.thread.is_alive()
    return attempt.error


@pytest.mark.parametrize(
    ("at", "how"),
    [
        (PAUSE_BEFORE_TABLE_COMMIT_ENV, "restart"),
        (PAUSE_BEFORE_TABLE_COMMIT_ENV, "down"),
        (PAUSE_BEFORE_QUARANTINE_COMMIT_ENV, "down"),
    ],
    ids=["table-publish-restart", "table-publish-down", "quarantine-publish-down"],
)
@pytest.mark.parametrize("table_format", ["iceberg"], indirect=True)
def test_a_postgresql_restart_in_the_publish_never_fails_the_batch_and_the_rerun_leaves_one_copy(
    spark, kafka_bootstrap, make_topic, make_pipeline, server, db_url, monkeypatch, tmp_path, at, how
) -> None:
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap, topic)
    name = f"pgr_{uuid.uuid4().hex[:8]}"
    config = make_pipeline([topic], db_url, name=name)  # the JDBC catalog: the control DB
    assert config.iceberg_catalog_uri == db_url
    store = ControlStore(db_url, connect_attempts=STORE_ATTEMPTS)
    store.ensure_schema()
    batch, _ = plan_batch(config, store)
    assert batch is not None
    pause = tmp_path / "pause"
    monkeypatch.setenv(at, str(pause))

    error = run_with_the_server_stopped(spark, config, store, batch, server, pause, how, monkeypatch)
    monkeypatch.delenv(at)

    row = store.get_batch(batch.batch_id)
    print(f"{name} {how} at {at}: {row.status.value}, {error!r}")
    if how == "down":  # the publish met a server that was down: it cannot have committed
        assert error is not None
    if error is not None:
        assert exit_code(error) == EXIT_RETRIABLE, repr(error)
        assert row.status is BatchStatus.PLANNED, row.error
        again = ingest_once(spark, config)  # the planned batch again, under a new fence
        assert again is not None and again.batch_id == batch.batch_id
    row = store.get_batch(batch.batch_id)
    assert row.status is BatchStatus.COMMITTED
    assert (row.records_written, row.records_quarantined) == (GOOD, BAD)
    assert offsets_on_main(config, config.output.table) == Counter(range(GOOD))
    assert offsets_on_main(config, config.output.quarantine_table) == Counter(range(GOOD, GOOD + BAD))
    table = IcebergCatalog.of(config).pyiceberg().load_table(config.output.table)
    assert row.delta_version == table.current_snapshot().snapshot_id  # the batch's own publish
    assert not [ref for ref in table.metadata.refs if ref.startswith("eos_")], table.metadata.refs
    assert_each_committed_record_once(spark, config)  # by a raw read_committed rescan of the topic
    store.close()


def run_job(config, env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    with log.open("w") as out:
        return subprocess.Popen(
            [CLI, "run", "--config", str(config.source), "--master", "local[1]"],
            env=env, start_new_session=True, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip


def hold_commit_row(proxy: TcpFaultProxy, table: str) -> None:
    """The next message carrying the coordinator's commit row for `table` (its path as a bound
    parameter beside a temporary file's name) reaches the server; its answer is kept from the
    writer, whose connection ends at proxy.release()."""
    proxy.arm("hold", carrying(bound_text(table), b".tmp/"))


def wait_fired(proxy: TcpFaultProxy, job: subprocess.Popen[str], log: Path) -> None:
    deadline = time.monotonic() + 600
    while not proxy.fired.wait(timeout=0.5):
        assert job.poll() is None, (
            f"the job ended ({job.returncode}) before its commit row:\n{log.read_text()[-4000:]}"
        )
        assert time.monotonic() < deadline, "the job's commit row never reached the proxy"


def test_the_commit_coordinators_postgresql_restarted_after_the_commit_row_never_fails_the_batch(
    kafka_bootstrap, make_topic, make_pipeline, server, db_url, s3_server, monkeypatch, tmp_path
) -> None:
    """`down` (each job an `eos-ingest run` process: 2 here); with EOS_LONG_TESTS=1, a `restart`
    first, on the same table (a job more)."""
    topic = make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    proxy = TcpFaultProxy(make_url(db_url).port or 5432)
    through_proxy = make_url(db_url).set(port=proxy.port).render_as_string(hide_password=False)
    config = make_pipeline(
        [topic], through_proxy, output={"path": f"s3a://{s3_server.make_bucket()}/tables/restarted"}
    )
    table = str(config.output_path)
    env = {**os.environ, **s3_server.env}
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)  # delta-rs's reads in this process
    store = ControlStore(db_url)
    expected: list[int] = []  # the records' offsets (a transaction's commit marker takes one)
    try:
        if LONG_TESTS:
            # restart: the server is back before the coordinator's retry, which finds its own row.
            producer.transaction(
                topic, [{"id": i, "name": "a", "amount": 1.0} for i in range(20)], commit=True
            )
            expected += range(20)
            hold_commit_row(proxy, table)
            job = run_job(config, env, tmp_path / "restart.log")
            wait_fired(proxy, job, tmp_path / "restart.log")
            time.sleep(0.5)  # the INSERT applied (autocommit)
            server.down()
            server.up()
            proxy.release()
            assert job.wait(timeout=600) == 0, (tmp_path / "restart.log").read_text()[-4000:]
            assert identities(table, topic) == Counter({(0, o): 1 for o in expected})

        # down: the retry finds the server down; the commit is decided but the job cannot know.
        producer.transaction(topic, [{"id": i, "name": "b", "amount": 2.0} for i in range(30)], commit=True)
        first = 21 if expected else 0  # after the restart's 20 records and their commit marker
        expected += range(first, first + 30)
        hold_commit_row(proxy, table)
        job = run_job(config, env, tmp_path / "down.log")
        wait_fired(proxy, job, tmp_path / "down.log")
        time.sleep(0.5)
        server.down()
        proxy.release()
        with contextlib.suppress(subprocess.TimeoutExpired):
            job.wait(timeout=DOWN_S)
        server.up()
        down = tmp_path / "down.log"
        assert job.wait(timeout=600) == EXIT_RETRIABLE, down.read_text()[-4000:]
        assert "PartialWriteError" in down.read_text() and "Delta commit coordinator" in down.read_text()
        planned = [b for b in store.list_batches(config.name) if b.status is BatchStatus.PLANNED]
        assert len(planned) == 1, store.list_batches(config.name)

        again = run_job(config, env, tmp_path / "rerun.log")
        assert again.wait(timeout=600) == 0, (tmp_path / "rerun.log").read_text()[-4000:]
        row = store.get_batch(planned[0].batch_id)
        assert row.status is BatchStatus.COMMITTED and row.records_written == 30
        assert identities(table, topic) == Counter({(0, o): 1 for o in expected})
        # By a raw read_committed rescan of the topic (no record of this test goes to quarantine).
        rows = [(topic, p, o) for (p, o), copies in identities(table, topic).items() for _ in range(copies)]
        assert_exactly_the_committed_records(kafka_bootstrap, committed_ranges(store, config.name), rows)
        entries = [(n, done) for path, n, done in commit_entries(db_url, table) if path == table]
        assert all(done for _, done in entries), entries
    finally:
        proxy.close()
        store.close()

"""A commit whose outcome is unknown is retriable, never "failed" (issue 48, item 2).

An Iceberg REST catalog behind the fault proxy (bench/fault_proxy.py) that forwards the
batch's publish (the commit that fast-forwards main) and then answers 503, drops the connection or
answers after the client's timeout; the same for the commit that creates the table. Each time the
server applied the commit and the client cannot know it: the error is retriable (exit 75), the
batch stays planned in the control DB, the rerun commits it, and the table holds exactly one copy
of each record, counted by pyiceberg straight from the server (not through the proxy, nor Spark).

The commit that creates the table: when it landed, the attempt finds the table and goes on;
when it did not, retriable, and the rerun creates it.

On the JDBC catalog of a SQLite control DB, a lock on the database held for a few seconds while the
batch publishes is waited out (the catalog's busy timeout), not failed on.

Real broker, Spark, Iceberg and REST server; the proxy is the only thing between them.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from bench.fault_proxy import FaultProxy, commits_to_a_batch_branch, creates_table, publishes_main
from bench.tcp_fault_proxy import TcpFaultProxy, carrying
from eos_ingest.batch.attempt import PAUSE_BEFORE_TABLE_COMMIT_ENV
from eos_ingest.batch.sequence import run_fenced
from eos_ingest.control.schema import BatchStatus
from eos_ingest.errors import EXIT_RETRIABLE, EosIngestError, exit_code
from eos_ingest.service.operations import open_store, plan_batch
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from tests.fixtures.pipelines import ingest_once
from tests.fixtures.postgres import on_control_db
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration

CONN = "AIRFLOW_CONN_ICEBERG_REST"
RECORDS = 12
# The REST client's socket timeout in the `slow` case, and how late the proxy answers then.
CLIENT_TIMEOUT_MS, SLOW_ANSWER_S = 4000, 7.0


def rows(count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(count)]


def on_server(iceberg_rest, table: str) -> Counter[tuple[int, int]]:
    """(partition, offset) -> copies in `table` on main, read by pyiceberg from the server itself."""
    direct = IcebergCatalog(
        "eos_check", iceberg_rest.uri, None, "rest",
        (("credential", f"{iceberg_rest.client_id}:{iceberg_rest.client_secret}"),),
    )  # fmt: skip
    read = (
        direct.pyiceberg()
        .load_table(table)
        .scan(selected_fields=("kafka_partition", "kafka_offset"))
        .to_arrow()
    )
    return Counter(zip(read["kafka_partition"].to_pylist(), read["kafka_offset"].to_pylist(), strict=True))


def rest_pipeline(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, proxy: FaultProxy, fault: str
):
    """A topic of RECORDS committed records and an Iceberg pipeline on the REST catalog through
    the proxy, its table lake.<name> its own."""
    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(RECORDS), commit=True, partition=0)
    name = f"unknown_{fault}_{uuid.uuid4().hex[:8]}"
    catalog = {"type": "rest", "uri": proxy.uri, "conn_id": "iceberg_rest"}
    config = make_pipeline(
        [topic],
        control_db_url,
        name=name,
        output={"format": "iceberg", "table": f"lake.{name}", "catalog": catalog},
    )
    if fault == "slow":  # set before the catalog's first load in this session (IcebergCatalog.ensure)
        spark.conf.set(f"spark.sql.catalog.eos_{name}.rest.client.socket-timeout-ms", str(CLIENT_TIMEOUT_MS))
    return config, name


def fails_retriably_then_lands_once(spark, config, name: str, proxy: FaultProxy, iceberg_rest) -> None:
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None

    started = time.monotonic()
    with pytest.raises(EosIngestError) as raised:
        run_fenced(spark, config, store, batch)
    assert proxy.fired, "the fault never fired: the proxy saw no matching commit"
    assert exit_code(raised.value) == EXIT_RETRIABLE, raised.value
    assert store.get_batch(batch.batch_id).status is BatchStatus.PLANNED
    print(f"{name}: retriable after {time.monotonic() - started:.1f} s: {raised.value}")

    again = ingest_once(spark, config)  # plan returns the planned batch; a new fence
    assert again is not None and again.batch_id == batch.batch_id
    assert store.get_batch(batch.batch_id).status is BatchStatus.COMMITTED
    copies = on_server(iceberg_rest, f"lake.{name}")
    assert copies == Counter({(0, offset): 1 for offset in range(RECORDS)}), copies


@on_control_db("sqlite")
@pytest.mark.parametrize("fault", ["503", "drop", "slow"])
def test_a_publish_whose_answer_is_lost_leaves_the_batch_planned_and_the_rerun_lands_once(
    spark,
    kafka_bootstrap,
    make_topic,
    make_pipeline,
    control_db_url,
    iceberg_rest,
    armed_proxy,
    monkeypatch,
    fault,
) -> None:
    monkeypatch.setenv(CONN, iceberg_rest.connection())
    config, name = rest_pipeline(
        spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, armed_proxy, fault
    )
    armed_proxy.arm(fault, publishes_main(name), delay_s=SLOW_ANSWER_S)
    fails_retriably_then_lands_once(spark, config, name, armed_proxy, iceberg_rest)


@on_control_db("sqlite")
@pytest.mark.parametrize("fault", ["503", "503-unforwarded"])
def test_a_lost_answer_to_the_table_creation_is_no_traceback_and_the_table_is_found_or_created_again(
    spark,
    kafka_bootstrap,
    make_topic,
    make_pipeline,
    control_db_url,
    iceberg_rest,
    armed_proxy,
    monkeypatch,
    fault,
) -> None:
    """503: the server created the table, the client heard 503 (Iceberg's CommitStateUnknown); the
    attempt finds the table there and goes on. 503-unforwarded: the same answer, the table never
    created: retriable, and the rerun creates it."""
    monkeypatch.setenv(CONN, iceberg_rest.connection())
    config, name = rest_pipeline(
        spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, armed_proxy, "create"
    )
    armed_proxy.arm(fault, creates_table(name))
    if fault == "503-unforwarded":
        fails_retriably_then_lands_once(spark, config, name, armed_proxy, iceberg_rest)
        return
    result = ingest_once(spark, config)
    assert armed_proxy.fired and result is not None and result.records_written == RECORDS
    assert on_server(iceberg_rest, f"lake.{name}") == Counter({(0, offset): 1 for offset in range(RECORDS)})


@on_control_db("sqlite")
def test_a_stage_that_keeps_losing_its_branch_commit_past_icebergs_retries_is_retriable(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, iceberg_rest, armed_proxy, monkeypatch
) -> None:
    """Every commit of the stage on its branch answered 409 (CommitFailedException, never
    forwarded), past Iceberg's own retries: each try stages anew, and past the tries the batch stays
    planned, exit 75; once the catalog takes them, the rerun lands once."""
    monkeypatch.setenv(CONN, iceberg_rest.connection())
    monkeypatch.setenv("EOS_WRITE_CONFLICT_ATTEMPTS", "2")
    config, name = rest_pipeline(
        spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, armed_proxy, "409"
    )
    armed_proxy.arm("409-unforwarded", commits_to_a_batch_branch(name), times=1000)
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    with pytest.raises(EosIngestError) as raised:
        run_fenced(spark, config, store, batch)
    assert len(armed_proxy.fired) > 2, armed_proxy.fired  # Iceberg's retries, then ours
    assert exit_code(raised.value) == EXIT_RETRIABLE, raised.value
    assert store.get_batch(batch.batch_id).status is BatchStatus.PLANNED
    armed_proxy.disarm()
    again = ingest_once(spark, config)
    assert again is not None and again.batch_id == batch.batch_id
    assert on_server(iceberg_rest, f"lake.{name}") == Counter({(0, offset): 1 for offset in range(RECORDS)})


HOLD_S = 5.0


@on_control_db("sqlite")
def test_a_catalog_database_locked_for_seconds_during_the_publish_is_waited_out(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, monkeypatch, tmp_path: Path
) -> None:
    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(RECORDS), commit=True, partition=0)
    name = f"locked_{uuid.uuid4().hex[:8]}"
    config = make_pipeline(
        [topic], control_db_url, name=name, output={"format": "iceberg", "table": f"lake.{name}"}
    )
    pause = tmp_path / "pause-before-publish"
    monkeypatch.setenv(PAUSE_BEFORE_TABLE_COMMIT_ENV, str(pause))
    database = make_url(control_db_url).database
    assert database
    held: list[float] = []

    def hold_the_lock() -> None:
        # At the pause (gate passed, publish next): take SQLite's write lock as another process's
        # writer would, let the publish go, keep the lock HOLD_S, let it go.
        deadline = time.monotonic() + 300
        while not pause.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        conn = sqlite3.connect(database, timeout=30, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            started = time.monotonic()
            pause.unlink()
            time.sleep(HOLD_S)
            conn.execute("ROLLBACK")
            held.append(time.monotonic() - started)
        finally:
            conn.close()

    holder = threading.Thread(target=hold_the_lock, daemon=True)
    holder.start()
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    result = run_fenced(spark, config, store, batch)
    holder.join(timeout=60)
    assert held and held[0] >= HOLD_S
    assert result.records_written == RECORDS
    assert store.get_batch(batch.batch_id).status is BatchStatus.COMMITTED
    table = IcebergCatalog.of(config).pyiceberg().load_table(f"lake.{name}")
    read = table.scan(selected_fields=("kafka_offset",)).to_arrow()
    assert Counter(read["kafka_offset"].to_pylist()) == Counter(range(RECORDS))
    # The version recorded is the batch's own publish: the snapshot main holds its rows at.
    assert result.table_version == table.current_snapshot().snapshot_id


@on_control_db("postgresql")
def test_a_jdbc_catalog_connection_dropped_after_the_publish_update_never_fails_the_batch_and_leaves_one_copy(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, monkeypatch, tmp_path: Path
) -> None:
    """The PostgreSQL JDBC catalog's connection dropped right after its UPDATE of the publish
    reached the server: the job either finds main holding the branch (Iceberg's pool retried the
    UPDATE on a new connection, which found it applied) and commits, or stops retriably with the
    batch planned and the rerun commits. Never `failed`; one copy."""
    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(RECORDS), commit=True, partition=0)
    name = f"dropped_{uuid.uuid4().hex[:8]}"
    db = make_url(control_db_url)
    proxy = TcpFaultProxy(db.port or 5432, db.host or "127.0.0.1")
    catalog_uri = db.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    output = {"format": "iceberg", "table": f"lake.{name}", "path": str(tmp_path / "warehouse"),
              "catalog": {"type": "jdbc", "uri": catalog_uri}}  # fmt: skip
    config = make_pipeline([topic], control_db_url, name=name, output=output)
    # Each statement with its text (no server-side prepared statement), so the proxy sees it.
    spark.conf.set(f"spark.sql.catalog.eos_{name}.jdbc.prepareThreshold", "0")
    pause = tmp_path / "pause-before-publish"
    monkeypatch.setenv(PAUSE_BEFORE_TABLE_COMMIT_ENV, str(pause))

    def arm_at_the_publish() -> None:
        deadline = time.monotonic() + 300
        while not pause.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        # The JDBC catalog's UPDATE of the table's row (its new metadata file's path in the
        # parameters) reaches the server, the answer is lost and the connection closed: the row is
        # written, the client hears a dropped connection (as from a restart right after it).
        proxy.arm("drop", carrying(b"UPDATE iceberg_tables", f"/lake/{name}/metadata/".encode()))
        pause.unlink()

    threading.Thread(target=arm_at_the_publish, daemon=True).start()
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    try:
        try:
            run_fenced(spark, config, store, batch)
            first = "committed"
        except EosIngestError as exc:
            assert exit_code(exc) == EXIT_RETRIABLE, exc
            assert store.get_batch(batch.batch_id).status is BatchStatus.PLANNED
            first = f"retriable: {exc}"
            monkeypatch.delenv(PAUSE_BEFORE_TABLE_COMMIT_ENV)
            again = ingest_once(spark, config)
            assert again is not None and again.batch_id == batch.batch_id
        print(f"{name}: the first attempt {first}")
        assert proxy.fired.is_set(), "the publish's UPDATE never reached the proxy"
        assert store.get_batch(batch.batch_id).status is BatchStatus.COMMITTED
        table = IcebergCatalog.of(config).pyiceberg().load_table(f"lake.{name}")
        read = table.scan(selected_fields=("kafka_offset",)).to_arrow()
        assert Counter(read["kafka_offset"].to_pylist()) == Counter(range(RECORDS))
    finally:
        proxy.close()

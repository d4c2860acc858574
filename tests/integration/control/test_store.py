"""The control store on real SQLite and real PostgreSQL: plan, fence, commit, backfill, failures."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC

import pytest
from sqlalchemy import create_engine, func, insert, inspect, select, text, update
from sqlalchemy.exc import IntegrityError

from eos_ingest.control.schema import (
    SCHEMA_VERSION,
    batches,
    metadata,
    offsets,
    schema_version,
    utc_now,
    vacuum_locks,
)
from eos_ingest.control.store import BatchKind, BatchStatus, ControlStore
from eos_ingest.errors import (
    BackfillRangeError,
    BatchStateError,
    ClusterMismatchError,
    ControlStoreUnavailableError,
    FencedError,
    PlanError,
    TopicRecreatedError,
)
from eos_ingest.plan.identity import KafkaIdentity, TopicIdentity
from eos_ingest.plan.ranges import LostOffsets, Plan, PlannedRange, TopicPartition
from tests.fixtures.pipelines import pending_scheduled_batch

pytestmark = pytest.mark.integration

P = "orders_pipeline"
T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


class Planner:
    """A make_plan that records the committed offsets it was called with."""

    def __init__(self, *ranges: PlannedRange, new: tuple[TopicPartition, ...] = (), skipped=(), delay=0.0):
        self.plan = Plan(ranges=ranges, skipped=tuple(skipped), new_partitions=new)
        self.calls: list[dict[TopicPartition, int]] = []
        self.delay = delay

    def __call__(self, committed: dict[TopicPartition, int]) -> Plan:
        self.calls.append(committed)
        time.sleep(self.delay)
        return self.plan


def first_plan(end0: int = 10, end1: int = 0) -> Planner:
    """Two new partitions from offset 0: orders[0] [0, end0), orders[1] [0, end1)."""
    return Planner(PlannedRange("orders", 0, 0, end0), PlannedRange("orders", 1, 0, end1), new=(T0, T1))


@pytest.fixture
def sql(control_db_url: str) -> Iterator[Callable[..., object]]:
    """Runs a statement behind the store's back, in its own committed transaction."""
    engine = create_engine(control_db_url)

    def run(statement, fetch: bool = False):
        with engine.begin() as conn:
            result = conn.execute(statement)
            return result.all() if fetch else result.rowcount

    yield run
    engine.dispose()


def commit(store: ControlStore, batch_id: int, fence: int, read: int = 10, quarantined: int = 0):
    return store.commit_batch(
        batch_id, fence, records_read=read, records_written=read - quarantined,
        records_quarantined=quarantined, delta_version=7, quarantine_delta_version=None,
    )  # fmt: skip


def test_plan_persists_batch_and_ranges(store: ControlStore) -> None:
    planner = first_plan(end0=10, end1=0)
    batch, created = store.plan_scheduled(
        P, planner, airflow_run_id="scheduled__1", override_note="first run"
    )
    assert created and batch is not None
    assert planner.calls == [{}]
    assert (batch.kind, batch.status, batch.fence) == (BatchKind.SCHEDULED, BatchStatus.PLANNED, 0)
    assert batch.ranges == (PlannedRange("orders", 0, 0, 10), PlannedRange("orders", 1, 0, 0))
    assert (batch.airflow_run_id, batch.override_note) == ("scheduled__1", "first run")
    assert batch.created_at.tzinfo == UTC and batch.committed_at is None
    assert store.get_batch(batch.batch_id) == batch
    assert pending_scheduled_batch(store, P) == batch
    assert store.committed_offsets(P) == {T0: 0, T1: 0}


def test_planning_while_a_scheduled_batch_is_pending_returns_it_unchanged(store: ControlStore) -> None:
    batch, _ = store.plan_scheduled(P, first_plan())
    store.take_fence(batch.batch_id)  # an attempt started and crashed
    retry = Planner(PlannedRange("orders", 0, 0, 99))
    again, created = store.plan_scheduled(P, retry, airflow_run_id="retry")
    assert not created and retry.calls == []
    assert again is not None and again.batch_id == batch.batch_id and again.ranges == batch.ranges
    assert again.airflow_run_id is None


def test_plan_without_records_creates_no_batch_but_records_new_partitions(store: ControlStore) -> None:
    empty = Planner(PlannedRange("orders", 0, 5, 5), new=(T0,))
    assert store.plan_scheduled(P, empty) == (None, True)
    assert store.committed_offsets(P) == {T0: 5}
    assert store.list_batches(P) == [] and pending_scheduled_batch(store, P) is None


def test_commit_moves_offsets_from_start_to_end(store: ControlStore) -> None:
    batch, _ = store.plan_scheduled(P, first_plan(end0=10, end1=0))
    done = commit(store, batch.batch_id, store.take_fence(batch.batch_id), read=10, quarantined=2)
    assert (done.status, done.records_read, done.records_written, done.records_quarantined) == (
        BatchStatus.COMMITTED, 10, 8, 2,
    )  # fmt: skip
    assert done.delta_version == 7 and done.committed_at is not None
    assert store.committed_offsets(P) == {T0: 10, T1: 0}
    assert store.committed_ranges(P) == [PlannedRange("orders", 0, 0, 10)]  # empty ranges hold no records
    nxt = Planner(PlannedRange("orders", 0, 10, 15), PlannedRange("orders", 1, 0, 3))
    second, created = store.plan_scheduled(P, nxt)
    assert created and second is not None and nxt.calls == [{T0: 10, T1: 0}]
    assert [b.batch_id for b in store.list_batches(P)] == [second.batch_id, batch.batch_id]


def test_commit_with_a_stale_fence_is_fenced_and_changes_nothing(store: ControlStore) -> None:
    batch, _ = store.plan_scheduled(P, first_plan())
    store.take_fence(batch.batch_id)
    with pytest.raises(FencedError, match=rf"batch {batch.batch_id}: this attempt holds fence 0 .* fence 1"):
        commit(store, batch.batch_id, 0)
    after = store.get_batch(batch.batch_id)
    assert (after.status, after.fence, after.records_read) == (BatchStatus.PLANNED, 1, None)
    assert store.committed_offsets(P) == {T0: 0, T1: 0}


def test_second_attempt_fences_the_first_and_commits(store: ControlStore) -> None:
    batch, _ = store.plan_scheduled(P, first_plan())
    zombie, current = store.take_fence(batch.batch_id), store.take_fence(batch.batch_id)
    assert (zombie, current) == (1, 2)
    with pytest.raises(FencedError):
        commit(store, batch.batch_id, zombie)
    assert commit(store, batch.batch_id, current).status is BatchStatus.COMMITTED
    with pytest.raises(FencedError, match="is committed with fence 2"):
        commit(store, batch.batch_id, current)  # a retried commit cannot move offsets twice
    assert store.committed_offsets(P) == {T0: 10, T1: 0}


def test_commit_rolls_back_the_batch_status_when_offsets_moved_behind_its_back(
    store: ControlStore, sql
) -> None:
    batch, _ = store.plan_scheduled(P, first_plan(end0=10, end1=5))
    fence = store.take_fence(batch.batch_id)
    # orders[0] would pass its compare-and-set; orders[1] (checked second) does not.
    sql(update(offsets).where(offsets.c.partition == 1).values(committed_offset=3))
    with pytest.raises(FencedError, match=r"orders\[1\] is 3, expected 0"):
        commit(store, batch.batch_id, fence)
    assert store.get_batch(batch.batch_id).status is BatchStatus.PLANNED
    assert store.committed_offsets(P) == {T0: 0, T1: 3}


def test_concurrent_plans_from_two_schedulers_create_one_batch(
    control_db_url: str, store: ControlStore
) -> None:
    planner = first_plan()
    planner.delay = 0.3  # hold the transaction open so the second planner arrives meanwhile
    start = threading.Barrier(2)
    results: list[tuple[int | None, bool]] = []
    errors: list[BaseException] = []

    def plan() -> None:
        other = ControlStore(control_db_url)
        try:
            start.wait()
            batch, created = other.plan_scheduled(P, planner)
            results.append((batch.batch_id if batch else None, created))
        except BaseException as exc:
            errors.append(exc)
        finally:
            other.close()

    threads = [threading.Thread(target=plan) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert sorted(created for _, created in results) == [False, True]
    assert len({batch_id for batch_id, _ in results}) == 1 and len(planner.calls) == 1


def test_database_refuses_a_second_planned_scheduled_batch(store: ControlStore, sql) -> None:
    store.plan_scheduled(P, first_plan())
    now = utc_now()
    row = {"pipeline": P, "fence": 0, "created_at": now, "updated_at": now}
    sql(insert(batches).values(**row, kind="backfill", status="planned"))  # backfills may run beside it
    with pytest.raises(IntegrityError):
        sql(insert(batches).values(**row, kind="scheduled", status="planned"))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            PlannedRange("orders", 0, 5, 15),
            r"orders\[0\] \[5, 15\) .* is not a non-empty range inside \[0, 10\)",
        ),
        (PlannedRange("orders", 0, 4, 4), r"orders\[0\] \[4, 4\) .* \(committed_offset=10\)"),
        (PlannedRange("orders", 7, 0, 1), r"orders\[7\] \[0, 1\) .* has no committed offset"),
    ],
    ids=["past-committed", "empty", "unknown-partition"],
)
def test_backfill_outside_the_committed_offsets_is_refused(store: ControlStore, bad, message) -> None:
    batch, _ = store.plan_scheduled(P, first_plan(end0=10))
    commit(store, batch.batch_id, store.take_fence(batch.batch_id))
    with pytest.raises(BackfillRangeError, match=message):
        store.create_backfill(P, [bad], reason="reprocess after parser fix")
    assert len(store.list_batches(P)) == 1


def test_backfill_commit_does_not_move_offsets(store: ControlStore) -> None:
    batch, _ = store.plan_scheduled(P, first_plan(end0=10))
    commit(store, batch.batch_id, store.take_fence(batch.batch_id))
    pending, _ = store.plan_scheduled(
        P, Planner(PlannedRange("orders", 0, 10, 20), PlannedRange("orders", 1, 0, 0))
    )
    backfill = store.create_backfill(
        P, [PlannedRange("orders", 0, 2, 6)], reason="parser fix", airflow_run_id="bf"
    )
    assert (backfill.kind, backfill.status, backfill.override_note) == (
        BatchKind.BACKFILL,
        BatchStatus.PLANNED,
        "parser fix",
    )
    done = commit(store, backfill.batch_id, store.take_fence(backfill.batch_id), read=4)
    assert done.status is BatchStatus.COMMITTED
    assert store.committed_offsets(P) == {T0: 10, T1: 0}
    assert pending_scheduled_batch(store, P) == pending  # untouched by the backfill
    assert PlannedRange("orders", 0, 2, 6) in store.committed_ranges(P, topic="orders")


def test_commit_refuses_counts_that_do_not_add_up(store: ControlStore) -> None:
    batch, _ = store.plan_scheduled(P, first_plan())
    fence = store.take_fence(batch.batch_id)
    with pytest.raises(
        ValueError, match="records_read=10 must equal records_written=8 \\+ records_quarantined=1"
    ):
        store.commit_batch(
            batch.batch_id, fence, records_read=10, records_written=8, records_quarantined=1,
            delta_version=1, quarantine_delta_version=1,
        )  # fmt: skip
    assert store.get_batch(batch.batch_id).status is BatchStatus.PLANNED


def test_failed_batch_frees_the_slot_and_the_next_plan_starts_from_the_same_offsets(
    store: ControlStore,
) -> None:
    batch, _ = store.plan_scheduled(P, first_plan())
    fence = store.take_fence(batch.batch_id)
    assert store.fail_batch(batch.batch_id, fence - 1, "zombie") is False  # a lost fence fails nothing
    assert store.fail_batch(batch.batch_id, fence, "ReadError: broker gone") is True
    failed = store.get_batch(batch.batch_id)
    assert (failed.status, failed.error) == (BatchStatus.FAILED, "ReadError: broker gone")
    with pytest.raises(BatchStateError, match=rf"batch {batch.batch_id} is failed, not planned"):
        store.take_fence(batch.batch_id)
    replan = Planner(PlannedRange("orders", 0, 0, 10), PlannedRange("orders", 1, 0, 0))
    again, created = store.plan_scheduled(P, replan)
    assert created and again is not None and again.batch_id != batch.batch_id
    assert replan.calls == [{T0: 0, T1: 0}]


def test_skipped_lost_offsets_move_to_the_log_start_and_are_noted(store: ControlStore) -> None:
    batch, _ = store.plan_scheduled(P, first_plan(end0=10))
    commit(store, batch.batch_id, store.take_fence(batch.batch_id))
    lost = Planner(
        PlannedRange("orders", 0, 50, 60), PlannedRange("orders", 1, 0, 0),
        skipped=[LostOffsets("orders", 0, committed=10, log_start=50)],
    )  # fmt: skip
    planned, _ = store.plan_scheduled(P, lost, override_note="accepted by ops")
    assert planned is not None and planned.override_note is not None
    assert planned.override_note.startswith("accepted by ops; data loss accepted")
    assert "orders[0] [10, 50)" in planned.override_note
    commit(store, planned.batch_id, store.take_fence(planned.batch_id))
    assert store.committed_offsets(P) == {T0: 60, T1: 0}


def test_plans_that_would_leave_a_gap_or_raise_write_nothing(store: ControlStore) -> None:
    with pytest.raises(PlanError, match=r"orders\[0\] \[3, 10\) must start at the committed offset None"):
        store.plan_scheduled(P, Planner(PlannedRange("orders", 0, 3, 10)))

    def broken(committed: dict[TopicPartition, int]) -> Plan:
        raise RuntimeError("broker unreachable")

    with pytest.raises(RuntimeError):
        store.plan_scheduled(P, broken)
    assert store.committed_offsets(P) == {} and store.list_batches(P) == []


def test_abandoned_batch_fences_its_running_attempt(store: ControlStore) -> None:
    batch, _ = store.plan_scheduled(P, first_plan())
    fence = store.take_fence(batch.batch_id)
    store.abandon_batch(batch.batch_id, "topic recreated")
    with pytest.raises(FencedError, match="is abandoned"):
        commit(store, batch.batch_id, fence)
    with pytest.raises(BatchStateError, match="nothing to abandon"):
        store.abandon_batch(batch.batch_id, "again")
    assert store.get_batch(batch.batch_id).error == "abandoned: topic recreated"


def test_reset_offsets_is_refused_while_a_scheduled_batch_is_planned(store: ControlStore) -> None:
    batch, _ = store.plan_scheduled(P, first_plan())
    with pytest.raises(BatchStateError, match=rf"planned scheduled batch {batch.batch_id}"):
        store.reset_offsets(P, "orders", {0: 0}, reason="topic recreated")
    store.abandon_batch(batch.batch_id, "topic recreated")
    assert store.reset_offsets(P, "orders", {0: 0, 2: 4}, reason="topic recreated") == {0: 0, 2: None}
    assert store.committed_offsets(P) == {T0: 0, T1: 0, TopicPartition("orders", 2): 4}


def test_quality_result_is_recorded_on_a_committed_batch(store: ControlStore) -> None:
    batch, _ = store.plan_scheduled(P, first_plan())
    commit(store, batch.batch_id, store.take_fence(batch.batch_id))
    store.record_quality(
        batch.batch_id, success=False, result_json='{"success": false}', report_path="/dd/1.html"
    )
    after = store.get_batch(batch.batch_id)
    assert (after.dq_success, after.dq_result, after.dq_report_path) == (
        False,
        '{"success": false}',
        "/dd/1.html",
    )
    with pytest.raises(BatchStateError, match="batch 999 does not exist"):
        store.record_quality(999, success=True, result_json="{}", report_path=None)


def test_schema_version_is_recorded_and_ensure_schema_is_idempotent(control_db_url: str, sql) -> None:
    stores = [ControlStore(control_db_url) for _ in range(3)]
    errors: list[BaseException] = []

    def ensure(s: ControlStore) -> None:
        try:
            s.ensure_schema()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ensure, args=(s,)) for s in stores]  # racing on an empty database
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    stores[0].ensure_schema()
    for s in stores:
        s.close()
    assert errors == []
    assert sql(select(schema_version.c.version), fetch=True) == [(SCHEMA_VERSION,)]
    assert sql(select(func.count()).select_from(offsets), fetch=True) == [(0,)]


def test_unreachable_database_is_unavailable_within_bounded_time_with_the_password_masked() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = ControlStore(f"postgresql+psycopg://eos:s3cret-pw@127.0.0.1:{port}/eos", retry_backoff_s=0.2)
    started = time.monotonic()
    with pytest.raises(ControlStoreUnavailableError) as raised:
        store.ensure_schema()
    assert time.monotonic() - started < 10
    message = str(raised.value)
    assert raised.value.retriable and "after 3 attempts" in message
    assert f"eos:***@127.0.0.1:{port}" in message and "s3cret-pw" not in message


def test_sqlite_writers_queue_instead_of_failing_with_database_is_locked(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    ControlStore(url).ensure_schema()
    pipelines = [f"p{i}" for i in range(8)]
    errors: list[BaseException] = []

    def plan(pipeline: str) -> None:
        try:
            ControlStore(url).plan_scheduled(pipeline, first_plan())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=plan, args=(p,)) for p in pipelines]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    store = ControlStore(url)
    assert all(pending_scheduled_batch(store, p) is not None for p in pipelines)


# -- topic and cluster identity (schema version 2) ---------------------------------------------------

OLD_ID, NEW_ID = "K0Zv1u1bSmC0xX2BnD3OYw", "o2W7a8c9RCm3nYk3t6M1pA"


def kafka(topic_id: str = OLD_ID, cluster: str = "cluster-A") -> KafkaIdentity:
    return KafkaIdentity(cluster_id=cluster, topic_ids={"orders": topic_id}, bootstrap="kafka-1:9092")


def test_first_plan_records_the_identity_and_its_ranges_carry_the_topic_id(store: ControlStore) -> None:
    batch, _ = store.plan_scheduled(P, first_plan(), identity=kafka())
    assert store.recorded_identities(P) == {"orders": TopicIdentity("orders", OLD_ID, "cluster-A")}
    assert batch is not None and batch.range_topic_ids == (OLD_ID, OLD_ID)
    assert {r.topic_id for r in store.range_records(P)} == {OLD_ID}


def test_a_recreated_topic_is_refused_at_plan_and_nothing_is_planned(store: ControlStore) -> None:
    batch, _ = store.plan_scheduled(P, first_plan(end0=10), identity=kafka())
    commit(store, batch.batch_id, store.take_fence(batch.batch_id))
    later = Planner(PlannedRange("orders", 0, 10, 40), PlannedRange("orders", 1, 0, 0))
    with pytest.raises(TopicRecreatedError) as recreated:
        store.plan_scheduled(P, later, identity=kafka(NEW_ID))
    message = str(recreated.value)
    assert all(w in message for w in ("'orders'", OLD_ID, NEW_ID, "reset-offsets --pipeline orders_pipeline"))
    assert later.calls == [] and pending_scheduled_batch(store, P) is None
    assert store.committed_offsets(P) == {T0: 10, T1: 0}
    assert store.recorded_identities(P)["orders"].topic_id == OLD_ID

    # The operator's reset records the new incarnation in the same transaction; plans go on.
    store.reset_offsets(P, "orders", {0: 0, 1: 0}, reason="recreated", identity=kafka(NEW_ID))
    assert store.recorded_identities(P)["orders"].topic_id == NEW_ID
    restart = Planner(PlannedRange("orders", 0, 0, 40), PlannedRange("orders", 1, 0, 0))
    again, created = store.plan_scheduled(P, restart, identity=kafka(NEW_ID))
    assert created and again is not None and again.range_topic_ids == (NEW_ID, NEW_ID)


def test_a_recreated_topic_is_reset_whole_and_partitions_it_lacks_lose_their_old_offsets(
    store: ControlStore,
) -> None:
    batch, _ = store.plan_scheduled(P, first_plan(end0=10, end1=7), identity=kafka())
    commit(store, batch.batch_id, store.take_fence(batch.batch_id))

    # Only partition 0 with --partitions: partition 1 would keep an offset of the deleted topic.
    with pytest.raises(BatchStateError, match=r"partitions \[1\] would keep offsets of the deleted topic"):
        store.reset_offsets(P, "orders", {0: 0}, reason="recreated", identity=kafka(NEW_ID))
    assert store.committed_offsets(P) == {T0: 10, T1: 7}
    assert store.recorded_identities(P)["orders"].topic_id == OLD_ID

    # The whole topic, recreated with one partition: partition 1's old offset is dropped, so when
    # the topic grows again that partition starts at its log start, not at offset 7.
    store.reset_offsets(P, "orders", {0: 0}, reason="recreated", identity=kafka(NEW_ID), whole_topic=True)
    assert store.committed_offsets(P) == {T0: 0}
    assert store.recorded_identities(P)["orders"].topic_id == NEW_ID

    # Without a recreation, --partitions moves only the partitions named.
    store.reset_offsets(P, "orders", {0: 0}, reason="replay", identity=kafka(NEW_ID))
    assert store.committed_offsets(P) == {T0: 0}


def test_a_pending_batch_of_the_old_topic_is_refused_with_abandon_in_the_fix(store: ControlStore) -> None:
    batch, _ = store.plan_scheduled(P, first_plan(), identity=kafka())
    with pytest.raises(TopicRecreatedError, match=rf"abandon --pipeline {P} --batch-id {batch.batch_id}"):
        store.plan_scheduled(P, first_plan(), identity=kafka(NEW_ID))


def test_another_cluster_is_refused_naming_both_cluster_ids_and_the_bootstrap_servers(
    store: ControlStore,
) -> None:
    store.plan_scheduled(P, Planner(PlannedRange("orders", 0, 5, 5), new=(T0,)), identity=kafka())
    with pytest.raises(ClusterMismatchError) as other:
        store.plan_scheduled(P, first_plan(), identity=kafka(cluster="cluster-B"))
    assert all(w in str(other.value) for w in ("cluster-A", "cluster-B", "kafka-1:9092", "reset-offsets"))
    assert store.recorded_identities(P)["orders"].cluster_id == "cluster-A"


def test_a_backfill_of_a_recreated_topic_is_refused_and_its_ranges_carry_the_topic_id(
    store: ControlStore,
) -> None:
    batch, _ = store.plan_scheduled(P, first_plan(end0=10), identity=kafka())
    commit(store, batch.batch_id, store.take_fence(batch.batch_id))
    with pytest.raises(TopicRecreatedError, match=NEW_ID):
        store.create_backfill(P, [PlannedRange("orders", 0, 2, 6)], reason="fix", identity=kafka(NEW_ID))
    with pytest.raises(ClusterMismatchError, match="cluster-B"):
        store.create_backfill(
            P, [PlannedRange("orders", 0, 2, 6)], reason="fix", identity=kafka(cluster="cluster-B")
        )
    backfill = store.create_backfill(P, [PlannedRange("orders", 0, 2, 6)], reason="fix", identity=kafka())
    assert backfill.range_topic_ids == (OLD_ID,)
    assert len(store.list_batches(P)) == 2


def _downgrade_to_version_1(control_db_url: str) -> None:
    """What a version-1 database holds: the tables without what migration 1 -> 2 adds."""
    engine = create_engine(control_db_url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE eos_lag_samples"))  # what 3 -> 4 adds
        conn.execute(text("DROP TABLE eos_vacuum_lock"))  # what 2 -> 3 adds
        conn.execute(text("DROP TABLE eos_topic_identity"))
        conn.execute(text("ALTER TABLE eos_batch_ranges DROP COLUMN topic_id"))
        conn.execute(update(schema_version).values(version=1))
    engine.dispose()


def test_a_version_1_database_is_migrated_and_its_next_plan_records_the_identity(
    control_db_url: str, sql
) -> None:
    old = ControlStore(control_db_url)
    old.ensure_schema()
    batch, _ = old.plan_scheduled(P, first_plan(end0=10))
    commit(old, batch.batch_id, old.take_fence(batch.batch_id))
    old.close()
    _downgrade_to_version_1(control_db_url)
    engine = create_engine(control_db_url)
    assert not {"eos_topic_identity", "eos_vacuum_lock", "eos_lag_samples"} & set(
        inspect(engine).get_table_names()
    )

    store = ControlStore(control_db_url)
    store.ensure_schema()
    store.ensure_schema()  # idempotent at the new version

    assert SCHEMA_VERSION == 4 and sql(select(schema_version.c.version), fetch=True) == [(4,)]
    inspector = inspect(engine)
    for table in metadata.sorted_tables:  # the same columns as a database created fresh
        columns = {c["name"]: c["nullable"] for c in inspector.get_columns(table.name)}
        assert columns == {c.name: c.nullable for c in table.columns}, table.name
    assert store.committed_offsets(P) == {T0: 10, T1: 0}
    assert [r.topic_id for r in store.range_records(P)] == [None, None]  # rows of version 1 stay
    assert store.recorded_identities(P) == {}

    nxt, _ = store.plan_scheduled(
        P, Planner(PlannedRange("orders", 0, 10, 20), PlannedRange("orders", 1, 0, 0)), identity=kafka()
    )
    assert store.recorded_identities(P) == {"orders": TopicIdentity("orders", OLD_ID, "cluster-A")}
    assert nxt is not None and nxt.range_topic_ids == (OLD_ID, OLD_ID)
    store.close()
    engine.dispose()


def test_the_vacuum_lock_is_taken_only_with_no_batch_in_flight_and_no_fence_is_given_while_it_is_held(
    store: ControlStore, sql
) -> None:
    from datetime import timedelta

    from eos_ingest.errors import MaintenanceBusyError

    lease = timedelta(minutes=30)
    batch, _ = store.plan_scheduled(P, first_plan(end0=10))
    assert [b.batch_id for b in store.begin_vacuum(P, "m1", lease)] == [batch.batch_id]  # in flight: no lock
    fence = store.take_fence(batch.batch_id)  # so the batch runs
    commit(store, batch.batch_id, fence)

    assert store.begin_vacuum(P, "m1", lease) == []  # nothing in flight: the lock is taken
    nxt, _ = store.plan_scheduled(
        P, Planner(PlannedRange("orders", 0, 10, 20), PlannedRange("orders", 1, 0, 0))
    )
    with pytest.raises(MaintenanceBusyError, match="vacuuming") as busy:
        store.take_fence(nxt.batch_id)  # planning goes on; no attempt stages while VACUUM may run
    assert busy.value.retriable and store.get_batch(nxt.batch_id).fence == 0
    store.end_vacuum(P, "another holder")  # only the holder releases it
    with pytest.raises(MaintenanceBusyError):
        store.take_fence(nxt.batch_id)
    store.end_vacuum(P, "m1")
    assert store.take_fence(nxt.batch_id) == 1

    # An abandoned batch stays in flight for a while: an attempt may be between its last fence
    # check and its Delta commit.
    store.abandon_batch(nxt.batch_id, "test")
    assert [b.batch_id for b in store.begin_vacuum(P, "m1", lease)] == [nxt.batch_id]
    sql(update(batches).values(updated_at=utc_now() - timedelta(minutes=11)))
    assert store.begin_vacuum(P, "m1", lease) == []
    # A lock whose maintain died ends with its lease.
    sql(update(vacuum_locks).values(expires_at=utc_now() - timedelta(seconds=1)))
    later, _ = store.plan_scheduled(
        P, Planner(PlannedRange("orders", 0, 10, 20), PlannedRange("orders", 1, 0, 0))
    )
    assert store.take_fence(later.batch_id) == 1


def test_a_vacuum_lock_is_renewed_only_by_its_holder_while_it_holds_it(store: ControlStore, sql) -> None:
    from datetime import timedelta

    lease = timedelta(minutes=10)
    assert store.begin_vacuum(P, "m1", lease) == []
    assert store.renew_vacuum(P, "m1", lease)
    assert not store.renew_vacuum(P, "m2", lease)  # not its lock
    sql(update(vacuum_locks).values(expires_at=utc_now() - timedelta(seconds=1)))
    assert not store.renew_vacuum(P, "m1", lease)  # ran out: a batch may have staged since

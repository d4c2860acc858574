"""A catch-up DAG run whose later batch does not commit fails, and its committed batches are audited.

The operator's failure handling reads a real (SQLite) control store: the run's first batch
committed, the next one failed or is still planned. Before, the task succeeded ("committed by an
earlier attempt: keeping it") and the run showed success while a batch of it had failed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eos_ingest.control.store import BatchStatus, ControlStore
from eos_ingest.plan.ranges import Plan, PlannedRange, TopicPartition
from eos_ingest.service.operations import unfinished_catch_up_batch
from tests.helpers.dag_bag import PIPELINES, dag_bag

P = "demo"
RUN = "scheduled__2026-11-25T00:00:00+00:00"
SPARK_FAILED = RuntimeError("Cannot execute: spark-submit ... Error code is: 1.")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ControlStore]:
    s = ControlStore(f"sqlite:///{tmp_path / 'control.db'}")
    s.ensure_schema()
    yield s
    s.close()


@pytest.fixture(scope="module")
def bag() -> Iterator[Any]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield dag_bag(PIPELINES, monkeypatch)


def plan_next(store: ControlStore, start: int, end: int, run_id: str = RUN) -> int:
    new = (TopicPartition("orders", 0),) if start == 0 else ()
    plan = Plan(ranges=(PlannedRange("orders", 0, start, end),), skipped=(), new_partitions=new)
    batch, created = store.plan_scheduled(P, lambda committed: plan, airflow_run_id=run_id)
    assert batch is not None and created
    return batch.batch_id


def commit(store: ControlStore, batch_id: int, records: int) -> None:
    fence = store.take_fence(batch_id)
    store.commit_batch(
        batch_id, fence, records_read=records, records_written=records, records_quarantined=0,
        delta_version=batch_id, quarantine_delta_version=None,
    )  # fmt: skip


def catch_up(store: ControlStore, later: str) -> tuple[int, int]:
    """A catch-up run: its first batch committed, the second `later` (failed or planned)."""
    first = plan_next(store, 0, 10)
    commit(store, first, 10)
    second = plan_next(store, 10, 20)
    if later == "failed":
        store.fail_batch(second, store.take_fence(second), "DataQualityError: 3 rows failed")
    return first, second


def test_the_unfinished_batch_of_a_catch_up_is_found_and_other_runs_are_not_counted(
    store: ControlStore,
) -> None:
    first, second = catch_up(store, "planned")
    assert unfinished_catch_up_batch(store, first).batch_id == second  # type: ignore[union-attr]
    commit(store, second, 10)
    assert unfinished_catch_up_batch(store, first) is None
    # A batch of the next Airflow run is not this run's.
    plan_next(store, 20, 30, run_id="scheduled__next")
    assert unfinished_catch_up_batch(store, first) is None


def test_a_catch_up_whose_later_batch_failed_fails_the_task_naming_that_batch(
    bag: Any, store: ControlStore
) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    spark = bag.dags[f"eos_ingest__{P}"].get_task("spark_ingest")
    first, second = catch_up(store, "failed")
    with pytest.raises(AirflowFailException, match=rf"batch {second} is failed: DataQualityError"):
        spark._explain_failure(store, first, SPARK_FAILED, catching_up=True)


def test_a_catch_up_whose_later_batch_is_still_planned_fails_for_a_retry(
    bag: Any, store: ControlStore
) -> None:
    spark = bag.dags[f"eos_ingest__{P}"].get_task("spark_ingest")
    first, second = catch_up(store, "planned")
    with pytest.raises(RuntimeError, match="Error code is: 1"):  # retriable: the retry resumes it
        spark._explain_failure(store, first, SPARK_FAILED, catching_up=True)
    assert store.get_batch(second).status is BatchStatus.PLANNED


def test_a_single_batch_committed_before_spark_submit_failed_is_kept(bag: Any, store: ControlStore) -> None:
    spark = bag.dags[f"eos_ingest__{P}"].get_task("spark_ingest")
    first, _ = catch_up(store, "planned")
    assert spark._explain_failure(store, first, SPARK_FAILED, catching_up=False) is None


@pytest.mark.parametrize("dag_id", [f"eos_ingest__{P}", f"eos_backfill__{P}"])
def test_validate_runs_after_a_failed_spark_ingest_and_publish_fails_the_run(bag: Any, dag_id: str) -> None:
    dag = bag.dags[dag_id]
    validate, publish = dag.get_task("validate"), dag.get_task("publish")
    # validate audits what committed even when spark_ingest failed ...
    assert validate.trigger_rule == "all_done_min_one_success"
    # ... and publish, a leaf that decides the run's state, waits on spark_ingest's success too.
    assert {"spark_ingest", "validate"} <= publish.upstream_task_ids
    assert publish.trigger_rule == "all_success"

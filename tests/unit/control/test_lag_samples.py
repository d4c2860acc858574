"""The lag history's table (eos_lag_samples): what a sample keeps, its two bounds, the index they
use, and the migration of a control DB file of schema version 3, on real SQLite files.

PostgreSQL's run of the same bounds and migration: tests/integration/control/test_lag_samples.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event, insert, inspect, select

from eos_ingest.control import lag_samples as samples_module
from eos_ingest.control.schema import (
    SCHEMA_VERSION,
    LagSource,
    lag_samples,
    metadata,
    offsets,
    schema_version,
)
from eos_ingest.control.store import ControlStore, LagSample

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ControlStore]:
    s = ControlStore(f"sqlite:///{tmp_path / 'control.db'}")
    s.ensure_schema()
    yield s
    s.close()


def sample(
    minutes: float, lag: int = 1, age: float | None = None, source: LagSource = LagSource.PLAN
) -> LagSample:
    return LagSample(T0 + timedelta(minutes=minutes), source, lag, age)


def kept(store: ControlStore, pipeline: str) -> list[tuple[float, int]]:
    """(minutes after T0, lag) of every sample the pipeline still has, oldest first."""
    found = store.lag_samples_since(pipeline, T0 - timedelta(days=365))
    return [((s.sampled_at - T0).total_seconds() / 60, s.lag_records) for s in found]


def test_a_sample_is_read_back_as_recorded_oldest_first(store: ControlStore) -> None:
    store.record_lag_sample("orders", sample(5, lag=40, age=12.5, source=LagSource.CHECK_LAG))
    store.record_lag_sample("orders", sample(1, lag=7))  # recorded later, taken earlier
    store.record_lag_sample("other", sample(3, lag=99))

    found = store.lag_samples_since("orders", T0)

    assert found == [sample(1, lag=7), sample(5, lag=40, age=12.5, source=LagSource.CHECK_LAG)]
    assert found[0].sampled_at.tzinfo is not None  # UTC, aware, as recorded
    assert store.lag_samples_since("orders", T0 + timedelta(minutes=2)) == found[1:]


def test_samples_older_than_the_kept_window_go_when_a_sample_is_recorded(store: ControlStore) -> None:
    hour = timedelta(hours=1)
    for minutes in (0, 50, 90):
        store.record_lag_sample("orders", sample(minutes, lag=int(minutes)), keep=hour)
    store.record_lag_sample("other", sample(0, lag=5), keep=hour)

    # 90 min - 1 h = 30 min: the sample at 0 went, the one at 50 stays; another pipeline's is its own.
    assert kept(store, "orders") == [(50, 50), (90, 90)]
    assert kept(store, "other") == [(0, 5)]


def test_at_most_max_per_pipeline_samples_are_kept_the_newest(store: ControlStore) -> None:
    # Taken out of order, two at one instant; each lag names its sample.
    for lag, minutes in enumerate((4, 1, 3, 3, 2)):
        store.record_lag_sample("orders", sample(minutes, lag=lag), max_per_pipeline=3)
    store.record_lag_sample("other", sample(0, lag=1), max_per_pipeline=3)
    store.record_lag_sample("other", sample(1, lag=2), max_per_pipeline=3)

    # The three newest by time: both of minute 3 are newer than those of minutes 1 and 2.
    assert kept(store, "orders") == [(3, 2), (3, 3), (4, 0)]
    assert kept(store, "other") == [(0, 1), (1, 2)]  # another pipeline's cap is its own
    store.record_lag_sample("orders", sample(3, lag=5), max_per_pipeline=3)  # a tie: the later one stays
    assert kept(store, "orders") == [(3, 3), (3, 5), (4, 0)]


def test_the_bounds_are_a_week_and_ten_thousand_samples_a_pipeline() -> None:
    """What docs/ui.md promises: a check a minute (1,440 a day) keeps about a week."""
    bounds = {"kept for": samples_module.KEEP, "rows a pipeline": samples_module.MAX_PER_PIPELINE}
    assert bounds == {"kept for": timedelta(days=7), "rows a pipeline": 10_000}


def test_a_negative_lag_is_refused_and_nothing_is_recorded(store: ControlStore) -> None:
    with pytest.raises(ValueError, match="negative"):
        store.record_lag_sample("orders", sample(0, lag=-1))
    assert kept(store, "orders") == []


def test_the_bounds_and_the_read_search_the_pipelines_index(store: ControlStore) -> None:
    """Pruning runs with every insert: each of its statements, and the page's read, must search
    ix_eos_lag_samples_pipeline rather than scan or sort the table (SQLite's plan)."""
    for minutes in range(20):
        store.record_lag_sample("orders", sample(minutes), max_per_pipeline=10)
    engine = store._db.engine  # the store's own connections
    statements: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if "eos_lag_samples" in statement and not statement.lstrip().upper().startswith("INSERT"):
            statements.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", seen)
    try:
        store.record_lag_sample("orders", sample(30), max_per_pipeline=10)
        store.lag_samples_since("orders", T0)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert len(statements) == 4  # two deletes, the look for the cap's first dropped row, the read
    with engine.connect() as conn:
        for statement, parameters in statements:
            plan = " | ".join(
                row[-1] for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
            )
            assert "ix_eos_lag_samples_pipeline" in plan, (statement, plan)
            assert "TEMP B-TREE" not in plan and "SCAN eos_lag_samples" not in plan, (statement, plan)
    assert len(kept(store, "orders")) == 10


def version_3_database(path: Path) -> str:
    """A control DB file as schema version 3 made it: every table but eos_lag_samples, version 3,
    and a pipeline's committed offset."""
    url = f"sqlite:///{path}"
    engine = create_engine(url)
    with engine.begin() as conn:
        metadata.create_all(conn, tables=[t for t in metadata.sorted_tables if t is not lag_samples])
        conn.execute(insert(schema_version).values(id=1, version=3, updated_at=T0))
        conn.execute(
            insert(offsets).values(
                pipeline="orders", topic="orders", partition=0, committed_offset=42, updated_at=T0
            )
        )
    engine.dispose()
    return url


def test_a_version_3_database_file_gets_the_lag_samples_table_and_keeps_its_offsets(tmp_path: Path) -> None:
    url = version_3_database(tmp_path / "control.db")
    engine = create_engine(url)
    assert "eos_lag_samples" not in inspect(engine).get_table_names()

    store = ControlStore(url)
    store.ensure_schema()
    store.ensure_schema()  # idempotent at the new version

    assert SCHEMA_VERSION == 4
    with engine.connect() as conn:
        assert conn.execute(select(schema_version.c.version)).scalar_one() == 4
    inspector = inspect(engine)
    columns = {c["name"]: c["nullable"] for c in inspector.get_columns("eos_lag_samples")}
    assert columns == {c.name: c.nullable for c in lag_samples.columns}  # as a database created fresh
    (index,) = inspector.get_indexes("eos_lag_samples")
    assert (index["name"], index["column_names"]) == (
        "ix_eos_lag_samples_pipeline", ["pipeline", "sampled_at", "sample_id"],
    )  # fmt: skip
    assert {tp.partition: o for tp, o in store.committed_offsets("orders").items()} == {0: 42}
    store.record_lag_sample("orders", sample(0, lag=3))
    assert kept(store, "orders") == [(0, 3)]
    store.close()
    engine.dispose()

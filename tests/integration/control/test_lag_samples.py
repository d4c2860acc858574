"""The lag history's table on real SQLite and real PostgreSQL: its bounds, and a database of
schema version 3 migrated to it (the SQLite-only details: tests/unit/control/test_lag_samples.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, inspect, select, text, update

from eos_ingest.control.schema import LagSource, lag_samples, schema_version
from eos_ingest.control.store import ControlStore, LagSample

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def at(minutes: float, lag: int, age: float | None = None) -> LagSample:
    return LagSample(T0 + timedelta(minutes=minutes), LagSource.CHECK_LAG, lag, age)


def lags(store: ControlStore, pipeline: str) -> list[int]:
    return [s.lag_records for s in store.lag_samples_since(pipeline, T0 - timedelta(days=30))]


def test_a_sample_keeps_its_time_and_age_and_the_bounds_drop_the_oldest(store: ControlStore) -> None:
    store.record_lag_sample("orders", at(0, 1, age=0.25))
    assert store.lag_samples_since("orders", T0) == [at(0, 1, age=0.25)]  # UTC and the age's fraction

    for minutes, lag in ((30, 2), (70, 3), (80, 4), (90, 5)):
        store.record_lag_sample("orders", at(minutes, lag), keep=timedelta(hours=1), max_per_pipeline=3)
    store.record_lag_sample("other", at(0, 9), keep=timedelta(hours=1), max_per_pipeline=3)

    # At 70 min the one at 0 is older than an hour and goes; at 90 the cap of 3 drops the one at 30.
    assert lags(store, "orders") == [3, 4, 5]
    assert lags(store, "other") == [9]


def test_a_version_3_database_is_migrated_to_the_lag_samples_table(control_db_url: str) -> None:
    fresh = ControlStore(control_db_url)
    fresh.ensure_schema()
    fresh.close()
    engine = create_engine(control_db_url)
    expected = {c["name"]: c["nullable"] for c in inspect(engine).get_columns("eos_lag_samples")}
    with engine.begin() as conn:  # what version 3 held: no eos_lag_samples
        conn.execute(text("DROP TABLE eos_lag_samples"))
        conn.execute(update(schema_version).values(version=3))

    store = ControlStore(control_db_url)
    store.ensure_schema()

    with engine.connect() as conn:
        assert conn.execute(select(schema_version.c.version)).scalar_one() == 4
    inspector = inspect(engine)
    assert {c["name"]: c["nullable"] for c in inspector.get_columns("eos_lag_samples")} == expected
    assert {c.name for c in lag_samples.columns} == set(expected)
    assert [i["name"] for i in inspector.get_indexes("eos_lag_samples")] == ["ix_eos_lag_samples_pipeline"]
    store.record_lag_sample("orders", at(0, 7))
    assert lags(store, "orders") == [7]
    store.close()
    engine.dispose()

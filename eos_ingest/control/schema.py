"""The control tables (SQLAlchemy Core), their named states, and the schema version with migrations.

The package owns this schema: `ensure_schema` creates it on an empty database and migrates an older
one, so no operator runs DDL by hand. To change the schema, change the tables below AND append a
migration to MIGRATIONS (a function of a Connection, run inside the schema transaction); the
version is 1 + len(MIGRATIONS). A fresh database is created directly at the current version.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Connection,
    DateTime,
    Dialect,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
    inspect,
    select,
    text,
    update,
)

from eos_ingest.errors import ControlSchemaError


class BatchKind(enum.StrEnum):
    """Why a batch exists: the schedule moves committed offsets; a backfill re-ingests old ranges."""

    SCHEDULED = "scheduled"
    BACKFILL = "backfill"


class BatchStatus(enum.StrEnum):
    """planned -> committed | failed | abandoned. Only a planned batch can run or commit."""

    PLANNED = "planned"
    COMMITTED = "committed"
    FAILED = "failed"
    ABANDONED = "abandoned"


class LagSource(enum.StrEnum):
    """Where a lag sample was read: a plan of a scheduled batch, or a lag check (check-lag, the alerts DAG)."""

    PLAN = "plan"
    CHECK_LAG = "check-lag"


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite keeps no offset, so UTC is implied)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utc_now() -> datetime:
    return datetime.now(UTC)


# BIGINT ids on PostgreSQL; on SQLite only INTEGER PRIMARY KEY is the autoincrementing rowid.
_Id = BigInteger().with_variant(Integer(), "sqlite")


def _one_of(column: str, values: type[enum.Enum], table: str = "eos_batches") -> CheckConstraint:
    allowed = ", ".join(f"'{v.value}'" for v in values)
    return CheckConstraint(f"{column} IN ({allowed})", name=f"ck_{table}_{column}")


metadata = MetaData()

schema_version = Table(
    "eos_schema_version",
    metadata,
    # One row (id = 1): the version of the schema the database holds.
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("version", Integer, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    CheckConstraint("id = 1", name="ck_eos_schema_version_one_row"),
)

offsets = Table(
    "eos_offsets",
    metadata,
    Column("pipeline", String(200), nullable=False),
    Column("topic", String(249), nullable=False),
    Column("partition", Integer, nullable=False),
    # The NEXT offset to ingest: every offset below it is in the output (or was accepted as lost).
    Column("committed_offset", BigInteger, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    PrimaryKeyConstraint("pipeline", "topic", "partition", name="pk_eos_offsets"),
    CheckConstraint("committed_offset >= 0", name="ck_eos_offsets_nonnegative"),
)

batches = Table(
    "eos_batches",
    metadata,
    Column("batch_id", _Id, primary_key=True, autoincrement=True),
    Column("pipeline", String(200), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    # Epoch of the attempt allowed to commit: each attempt takes fence + 1; a stale one is refused.
    Column("fence", Integer, nullable=False, default=0),
    Column("records_read", BigInteger),
    Column("records_written", BigInteger),
    Column("records_quarantined", BigInteger),
    Column("delta_version", BigInteger),
    Column("quarantine_delta_version", BigInteger),
    Column("dq_success", Boolean),
    Column("dq_result", Text),
    Column("dq_report_path", Text),
    Column("override_note", Text),
    Column("error", Text),
    Column("airflow_run_id", Text),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("committed_at", UtcDateTime),
    _one_of("kind", BatchKind),
    _one_of("status", BatchStatus),
    # Ids end up in Delta commit metadata: SQLite must never reuse one (plain rowids can be).
    sqlite_autoincrement=True,
)
Index("ix_eos_batches_pipeline", batches.c.pipeline, batches.c.batch_id)
# At most one planned scheduled batch per pipeline, enforced by the database itself: a second
# planner that slipped past the application lock still cannot create a second one.
_planned_scheduled = text(f"status = '{BatchStatus.PLANNED.value}' AND kind = '{BatchKind.SCHEDULED.value}'")
Index(
    "ux_eos_batches_one_planned_scheduled",
    batches.c.pipeline,
    unique=True,
    sqlite_where=_planned_scheduled,
    postgresql_where=_planned_scheduled,
)

batch_ranges = Table(
    "eos_batch_ranges",
    metadata,
    Column("batch_id", _Id, nullable=False),
    Column("topic", String(249), nullable=False),
    Column("partition", Integer, nullable=False),
    Column("start_offset", BigInteger, nullable=False),
    Column("end_offset", BigInteger, nullable=False),
    # The Kafka topic id the range was planned under (schema version 2; NULL in older rows).
    Column("topic_id", String(64)),
    PrimaryKeyConstraint("batch_id", "topic", "partition", name="pk_eos_batch_ranges"),
    ForeignKeyConstraint(["batch_id"], [batches.c.batch_id], name="fk_eos_batch_ranges_batch"),
    CheckConstraint("0 <= start_offset AND start_offset <= end_offset", name="ck_eos_batch_ranges_order"),
)

topic_identities = Table(
    "eos_topic_identity",
    metadata,
    # Which incarnation of a topic, on which cluster, the pipeline's offsets of it belong to
    # (schema version 2). Recorded by the first plan of the topic and by reset-offsets; NULL = unknown.
    Column("pipeline", String(200), nullable=False),
    Column("topic", String(249), nullable=False),
    Column("topic_id", String(64)),
    Column("cluster_id", String(200)),
    Column("recorded_at", UtcDateTime, nullable=False),
    PrimaryKeyConstraint("pipeline", "topic", name="pk_eos_topic_identity"),
)


vacuum_locks = Table(
    "eos_vacuum_lock",
    metadata,
    # Held by `eos-ingest maintain` from its last check that no batch is in flight to the end of its
    # VACUUM (schema version 3): while it is held no attempt takes a fence, so none stages files that
    # a VACUUM with a short retention could delete before they are committed. expires_at bounds a
    # lock whose maintain died (a VACUUM spares files newer than its start, so only the lock's first
    # moments matter; see storage/delta/maintenance.py).
    Column("pipeline", String(200), nullable=False),
    Column("holder", Text, nullable=False),
    Column("taken_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    PrimaryKeyConstraint("pipeline", name="pk_eos_vacuum_lock"),
)


lag_samples = Table(
    "eos_lag_samples",
    metadata,
    # A pipeline's lag as a plan or a lag check read it (schema version 4): the history the
    # Ingestion page charts. Bounded per pipeline by control/lag_samples.py (its age and row cap).
    Column("sample_id", _Id, primary_key=True, autoincrement=True),
    Column("pipeline", String(200), nullable=False),
    Column("sampled_at", UtcDateTime, nullable=False),
    Column("source", String(16), nullable=False),
    # The sum of the partitions' positive lags (LSO - committed offset), as the page's total lag.
    Column("lag_records", BigInteger, nullable=False),
    # The age of the oldest unread record, in seconds: 0 when nothing is unread, NULL when it was
    # not read (a plan reads no record) or Kafka did not return it in time.
    Column("oldest_unread_age_s", Float),
    _one_of("source", LagSource, "eos_lag_samples"),
    CheckConstraint("lag_records >= 0", name="ck_eos_lag_samples_nonnegative"),
)
# Both the page's read (a pipeline's samples since a time) and the pruning (the oldest first) use it.
Index(
    "ix_eos_lag_samples_pipeline", lag_samples.c.pipeline, lag_samples.c.sampled_at, lag_samples.c.sample_id
)


def _v2_topic_identity(conn: Connection) -> None:
    """Version 2: the per (pipeline, topic) identity table and eos_batch_ranges.topic_id. Existing
    pipelines have no recorded identity; their next plan records the current one."""
    topic_identities.create(conn)
    conn.execute(text("ALTER TABLE eos_batch_ranges ADD COLUMN topic_id VARCHAR(64)"))


def _v3_vacuum_lock(conn: Connection) -> None:
    """Version 3: the per-pipeline VACUUM lock that take_fence respects."""
    vacuum_locks.create(conn)


def _v4_lag_samples(conn: Connection) -> None:
    """Version 4: the lag samples the page's charts read (empty: the history starts with the next plan)."""
    lag_samples.create(conn)  # with its index


# MIGRATIONS[i] moves a database from version i + 1 to i + 2. Append only; never edit a released one.
MIGRATIONS: tuple[Callable[[Connection], None], ...] = (_v2_topic_identity, _v3_vacuum_lock, _v4_lag_samples)
SCHEMA_VERSION = 1 + len(MIGRATIONS)


def advisory_key(name: str) -> int:
    """A stable signed 64-bit key for pg_advisory_xact_lock (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


def ensure_schema(conn: Connection) -> int:
    """Create or migrate the control tables inside the caller's write transaction; returns the version.

    Concurrent callers are serialized: SQLite by the caller's BEGIN IMMEDIATE, PostgreSQL (whose DDL
    is transactional) by an advisory lock held until commit, so the second caller sees the tables.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": advisory_key("eos:schema")})
    current: int | None = None
    if inspect(conn).has_table(schema_version.name):
        current = conn.execute(select(schema_version.c.version)).scalar_one_or_none()
    if current is None:
        metadata.create_all(conn, checkfirst=True)
        _stamp(conn, SCHEMA_VERSION, insert=True)
        return SCHEMA_VERSION
    if current > SCHEMA_VERSION:
        raise ControlSchemaError(
            f"the control database is at schema version {current}, newer than {SCHEMA_VERSION} known to "
            "this eos-ingest: upgrade eos-ingest everywhere it runs (scheduler, workers, CLI)"
        )
    for version in range(current, SCHEMA_VERSION):
        MIGRATIONS[version - 1](conn)
        _stamp(conn, version + 1, insert=False)
    return SCHEMA_VERSION


def _stamp(conn: Connection, version: int, *, insert: bool) -> None:
    values: dict[str, Any] = {"version": version, "updated_at": utc_now()}
    if insert:
        conn.execute(schema_version.insert().values(id=1, **values))
    else:
        conn.execute(update(schema_version).where(schema_version.c.id == 1).values(**values))

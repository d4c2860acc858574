"""The pipeline's VACUUM lock: while maintain vacuums a pipeline's tables no attempt takes a fence,
so none stages files that the VACUUM could delete.

Each function runs inside the caller's transaction (ControlStore's); none commits.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, delete, insert, select, update

from eos_ingest.control import queries as q
from eos_ingest.control.batches import Batch
from eos_ingest.control.schema import BatchStatus, batches, utc_now, vacuum_locks
from eos_ingest.errors import MaintenanceBusyError

# An abandoned batch counts as in flight this long after the abandon: an attempt of it that passed
# its last fence check just before may still be committing its staged files to Delta.
ABANDONED_IN_FLIGHT = timedelta(minutes=10)


def held(conn: Connection, pipeline: str, now: datetime) -> Row[Any] | None:
    """The pipeline's VACUUM lock while it is held (not expired), else None."""
    where = (vacuum_locks.c.pipeline == pipeline) & (vacuum_locks.c.expires_at > now)
    return conn.execute(select(vacuum_locks).where(where)).first()


def refuse_fence_while_held(conn: Connection, batch: Batch) -> None:
    """MaintenanceBusyError (retriable) if maintain holds the lock of the planned batch's pipeline."""
    lock = held(conn, batch.pipeline, utc_now())
    if lock is not None and batch.status is BatchStatus.PLANNED:
        raise MaintenanceBusyError(
            f"batch {batch.batch_id}: maintain ({lock.holder}) is vacuuming the tables of pipeline "
            f"{batch.pipeline} since {lock.taken_at.isoformat()}, so this attempt takes no fence "
            f"and writes nothing; the batch stays planned: run it again once maintain is done "
            f"(its lock ends with it, or at {lock.expires_at.isoformat()} at the latest)"
        )


def begin(conn: Connection, pipeline: str, holder: str, lease: timedelta) -> list[Batch]:
    """Take the lock unless a batch is in flight; returns those batches (and takes no lock), else []."""
    q.lock_pipeline(conn, pipeline)
    now = utc_now()
    planned = batches.c.status == BatchStatus.PLANNED.value
    abandoned = (batches.c.status == BatchStatus.ABANDONED.value) & (
        batches.c.updated_at > now - ABANDONED_IN_FLIGHT
    )
    in_flight = q.load(conn, (batches.c.pipeline == pipeline) & (planned | abandoned), 10_000)
    if in_flight:
        return in_flight
    conn.execute(delete(vacuum_locks).where(vacuum_locks.c.pipeline == pipeline))
    conn.execute(
        insert(vacuum_locks).values(pipeline=pipeline, holder=holder, taken_at=now, expires_at=now + lease)
    )
    return []


def renew(conn: Connection, pipeline: str, holder: str, lease: timedelta) -> bool:
    """Extend this holder's lock by `lease` from now; False if `holder` no longer holds it."""
    where = (vacuum_locks.c.pipeline == pipeline) & (vacuum_locks.c.holder == holder)
    where &= vacuum_locks.c.expires_at > utc_now()
    query = update(vacuum_locks).where(where).values(expires_at=utc_now() + lease)
    return int(conn.execute(query).rowcount) == 1


def end(conn: Connection, pipeline: str, holder: str) -> None:
    """Release the lock (only this holder's)."""
    where = (vacuum_locks.c.pipeline == pipeline) & (vacuum_locks.c.holder == holder)
    conn.execute(delete(vacuum_locks).where(where))

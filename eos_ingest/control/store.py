"""The control store: committed offsets, batches and their ranges (SQLite or PostgreSQL, SQLAlchemy Core).

It implements steps 1 (plan), 2 (fence) and 7 (commit) of the exactly-once protocol (docs/exactly-once.md,
"How exactly-once works"): every state change is one short transaction guarded by a compare-and-set, so a
retry, a zombie attempt or a second scheduler can never move offsets twice.

ControlStore is the one door: it owns the transactions and delegates their bodies by concept to
scheduled_plan (step 1), batch_commit (step 7), backfill, offset_reset, vacuum_lock, lag_samples
(the page's lag history) and queries (rows and reads): each method is a short transaction around
one of those bodies, with the contract its callers rely on in its docstring.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from sqlalchemy import Connection, and_, select, update
from sqlalchemy.exc import IntegrityError, ProgrammingError

from eos_ingest.control import backfill, batch_commit, lag_samples, offset_reset, scheduled_plan, vacuum_lock
from eos_ingest.control import queries as q
from eos_ingest.control.batches import Batch, RangeRecord
from eos_ingest.control.engine import TransactionRunner
from eos_ingest.control.lag_samples import LagSample
from eos_ingest.control.schema import BatchKind, BatchStatus, batches, utc_now
from eos_ingest.control.schema import ensure_schema as _ensure_schema
from eos_ingest.errors import BatchStateError
from eos_ingest.plan.identity import KafkaIdentity, TopicIdentity
from eos_ingest.plan.ranges import Plan, PlannedRange, TopicPartition
from eos_ingest.redact import redact_text

__all__ = ["Batch", "BatchKind", "BatchStatus", "ControlStore", "LagSample", "RangeRecord"]


class ControlStore:
    """The control tables of every pipeline in one database (a SQLite file or PostgreSQL).

    Concurrency: on SQLite every write transaction starts with BEGIN IMMEDIATE, so writers queue
    on the database lock (busy_timeout 30 s) instead of failing with "database is locked". On
    PostgreSQL we stay at READ COMMITTED rather than SERIALIZABLE: each invariant is guarded either
    by one conditional UPDATE (PostgreSQL locks the row and re-checks the WHERE after waiting, so it
    is an atomic compare-and-set) or by a per-pipeline advisory lock held to commit (plan, backfill,
    reset). SERIALIZABLE would add spurious serialization failures that every caller must retry,
    and would blur a real fence race into a retriable error.
    """

    def __init__(
        self,
        url: str,
        *,
        connect_attempts: int = 3,
        retry_backoff_s: float = 1.0,
        connect_timeout_s: int = 2,
    ) -> None:
        """Open (lazily) the database at `url`, a SQLAlchemy URL: sqlite:///<file> or
        postgresql+psycopg://user:password@host:port/db.

        An unreachable database is retried connect_attempts times, sleeping retry_backoff_s,
        then twice that, ...; then ControlStoreUnavailableError. With the defaults a refused
        connection gives up after 3 s, a silent host after 3 x 2 s (PostgreSQL connect timeout;
        libpq rounds anything below 2 s up to 2 s) + 3 s = 9 s."""
        self._db = TransactionRunner(url, connect_attempts, retry_backoff_s, connect_timeout_s)
        self.safe_url = self._db.safe_url

    def close(self) -> None:
        """Close pooled connections (a PostgreSQL database cannot be dropped while they are open)."""
        self._db.dispose()

    # -- schema and reads ----------------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Create the control tables, or migrate them to this version. Idempotent; safe to race."""
        try:
            self._db.run(_ensure_schema, write=True)
        except (ProgrammingError, IntegrityError) as exc:
            # Our lock serializes our own callers; only a writer without it could race the CREATE
            # (PostgreSQL reports "already exists" or a duplicate pg_type key). It has committed by
            # now, so a second pass sees its tables.
            if "already exists" not in str(exc) and "duplicate key" not in str(exc):
                raise
            self._db.run(_ensure_schema, write=True)

    def committed_offsets(self, pipeline: str) -> dict[TopicPartition, int]:
        """The next offset to ingest, per partition the pipeline has seen."""
        return self._db.run(lambda conn: q.committed(conn, pipeline), write=False)

    def get_batch(self, batch_id: int) -> Batch:
        """The batch, or BatchStateError if the id is unknown."""
        return self._db.run(lambda conn: self._require(conn, batch_id), write=False)

    def get_pipeline_batch(self, pipeline: str, batch_id: int) -> Batch:
        """The batch, or BatchStateError if the id is unknown or belongs to another pipeline."""
        batch = self.get_batch(batch_id)
        if batch.pipeline != pipeline:
            raise BatchStateError(
                f"batch {batch_id} belongs to pipeline {batch.pipeline!r}, not to pipeline {pipeline!r}: "
                f"nothing was done; pass --pipeline {batch.pipeline} (or its config) with this batch id, "
                f"or the id of a batch of {pipeline!r} (eos-ingest status --pipeline {pipeline})"
            )
        return batch

    def list_batches(
        self, pipeline: str, limit: int = 20, *, before: int | None = None, after: int | None = None
    ) -> list[Batch]:
        """The pipeline's most recent batches, newest first: of all, of those with an id below
        `before`, or the `limit` batches just above `after` (a page of the history).

        Keyset paging on (pipeline, batch_id), the index ix_eos_batches_pipeline: a page deep in a
        long history costs what the first page costs, unlike an OFFSET that reads every row above it.
        """
        query = batches.c.pipeline == pipeline
        if before is not None:
            query &= batches.c.batch_id < before
        if after is not None:
            query &= batches.c.batch_id > after
            found = self._db.run(lambda conn: q.load(conn, query, limit, oldest_first=True), write=False)
            return found[::-1]
        return self._db.run(lambda conn: q.load(conn, query, limit), write=False)

    def planned_batches(self, pipeline: str) -> list[Batch]:
        """The pipeline's planned batches (scheduled and backfill), newest first: the unfinished
        work that may still read the table's current versions (maintenance's VACUUM keeps them)."""
        query = (batches.c.pipeline == pipeline) & (batches.c.status == BatchStatus.PLANNED.value)
        return self._db.run(lambda conn: q.load(conn, query, 10_000), write=False)

    def backfill_of_run(self, pipeline: str, airflow_run_id: str) -> Batch | None:
        """The backfill batch an Airflow run recorded, however many batches came since (the
        backfill DAG's retried or cleared recording task gets it back, and its spark_ingest
        resumes it under a new fence while it is planned); None if the run recorded none."""
        query = (
            (batches.c.pipeline == pipeline)
            & (batches.c.kind == BatchKind.BACKFILL.value)
            & (batches.c.airflow_run_id == airflow_run_id)
        )
        found = self._db.run(lambda conn: q.load(conn, query, 1), write=False)
        return found[0] if found else None

    def batches_of_run(self, pipeline: str, first_batch_id: int, limit: int = 10_000) -> list[Batch]:
        """Scheduled batches from `first_batch_id` on, oldest first: what one catch-up run planned."""
        query = (
            (batches.c.pipeline == pipeline)
            & (batches.c.batch_id >= first_batch_id)
            & (batches.c.kind == BatchKind.SCHEDULED.value)
        )
        return self._db.run(lambda conn: q.load(conn, query, limit), write=False)[::-1]

    def committed_ranges(self, pipeline: str, topic: str | None = None) -> list[PlannedRange]:
        """Non-empty ranges of committed batches (scheduled and backfill): what `verify` checks."""
        return self._db.run(lambda conn: q.committed_ranges(conn, pipeline, topic), write=False)

    def range_records(self, pipeline: str) -> list[RangeRecord]:
        """Every range of every batch of the pipeline with its topic id and whether it committed."""
        return self._db.run(lambda conn: q.range_records(conn, pipeline), write=False)

    def recorded_identities(self, pipeline: str) -> dict[str, TopicIdentity]:
        """Per topic, the topic id and cluster id the pipeline's offsets belong to (as recorded)."""
        return self._db.run(lambda conn: q.recorded_identities(conn, pipeline), write=False)

    # -- plan ----------------------------------------------------------------------------------

    def plan_scheduled(
        self,
        pipeline: str,
        make_plan: Callable[[dict[TopicPartition, int]], Plan],
        *,
        identity: KafkaIdentity | None = None,
        airflow_run_id: str | None = None,
        override_note: str | None = None,
        log_starts: Mapping[TopicPartition, int] | None = None,
        allow_data_loss: bool = False,
    ) -> tuple[Batch | None, bool]:
        """Step 1 of the protocol, in one short transaction. Returns (batch, created):

        - (pending, False): a planned scheduled batch exists; it is returned unchanged and
          make_plan is not called, so a retry re-runs exactly the same ranges;
        - (batch, True): make_plan(committed offsets) was persisted as a new planned batch;
        - (None, True): the plan holds no records, so no batch to run (and no Spark work); new
          partitions' offsets are still recorded, and accepted losses (plan.skipped) too: their
          offsets move and a committed batch with the empty ranges carries the loss in its note.

        With `log_starts` (read now), a pending batch with a range starting below its partition's
        log start can never be read: OffsetsLostError, nothing changed; or, with allow_data_loss,
        it is abandoned (reason naming the loss) and a new batch planned, in this one transaction.

        make_plan must be pure: if it raises, nothing is written. New partitions start at their
        range's start; a skipped (lost) partition's committed offset moves to its log start and
        the loss is appended to the batch's override_note.

        `identity` (Kafka's cluster id and topic ids, read with the offsets) is compared with the
        recorded one of each of its topics first, pending batch or not: TopicRecreatedError or
        ClusterMismatchError on a mismatch, and nothing is written. A topic without a recorded
        identity (its first plan, or a database migrated from schema version 1) gets the current
        one recorded; the new batch's ranges carry their topic id.
        """

        def run(conn: Connection) -> tuple[Batch | None, bool]:
            return scheduled_plan.plan_scheduled(
                conn,
                pipeline,
                make_plan,
                identity,
                airflow_run_id,
                override_note,
                log_starts,
                allow_data_loss,
            )

        return self._db.run(run, write=True)

    def create_backfill(
        self,
        pipeline: str,
        ranges: Sequence[PlannedRange],
        *,
        reason: str,
        airflow_run_id: str | None = None,
        identity: KafkaIdentity | None = None,
    ) -> Batch:
        """A planned backfill batch re-ingesting ranges below the committed offsets.

        Each range must be non-empty and inside [0, committed_offset) of a partition the pipeline
        has offsets for (checked here, in the same transaction); checking it against the log start
        needs Kafka and is the caller's job. A backfill may be planned while a scheduled batch is;
        it never moves committed offsets. `reason` is kept in override_note. `identity` is checked
        against the recorded one as in plan_scheduled (a recreated topic or another cluster is
        refused) and the ranges carry their topic id.
        """
        backfill.check_request(pipeline, ranges, reason)

        def run(conn: Connection) -> Batch:
            batch_id = backfill.insert_backfill(conn, pipeline, ranges, reason, airflow_run_id, identity)
            return self._require(conn, batch_id)

        return self._db.run(run, write=True)

    # -- run and commit --------------------------------------------------------------------------

    def take_fence(self, batch_id: int) -> int:
        """Step 2: increment a planned batch's fence and return it; only that value can commit.

        While maintain holds the pipeline's VACUUM lock no fence is given (MaintenanceBusyError,
        retriable): the attempt would stage files that the VACUUM could delete."""

        def run(conn: Connection) -> int:
            vacuum_lock.refuse_fence_while_held(conn, self._require(conn, batch_id))
            where = and_(batches.c.batch_id == batch_id, batches.c.status == BatchStatus.PLANNED.value)
            changed = conn.execute(
                update(batches).where(where).values(fence=batches.c.fence + 1, updated_at=utc_now())
            )
            if changed.rowcount != 1:
                batch = self._require(conn, batch_id)
                raise BatchStateError(
                    f"batch {batch_id} is {batch.status.value}, not planned: only a planned batch can be "
                    "run; plan a new batch (or a backfill) to ingest its ranges again"
                )
            return int(
                conn.execute(select(batches.c.fence).where(batches.c.batch_id == batch_id)).scalar_one()
            )

        return self._db.run(run, write=True)

    def begin_vacuum(self, pipeline: str, holder: str, lease: timedelta) -> list[Batch]:
        """Take the pipeline's VACUUM lock unless a batch is in flight; returns those batches (and
        takes no lock), else []. In flight: planned (it may have staged files, or stage them once it
        has a fence), or abandoned less than vacuum_lock.ABANDONED_IN_FLIGHT ago. Serialized with
        planners by the pipeline lock, so no batch is planned between this check and the lock."""
        return self._db.run(lambda conn: vacuum_lock.begin(conn, pipeline, holder, lease), write=True)

    def renew_vacuum(self, pipeline: str, holder: str, lease: timedelta) -> bool:
        """Extend this holder's VACUUM lock by `lease` from now (before each VACUUM: the lock must
        hold until the VACUUM has started); False if it is no longer held by `holder`."""
        return self._db.run(lambda conn: vacuum_lock.renew(conn, pipeline, holder, lease), write=True)

    def end_vacuum(self, pipeline: str, holder: str) -> None:
        """Release the VACUUM lock taken by begin_vacuum (only this holder's)."""
        self._db.run(lambda conn: vacuum_lock.end(conn, pipeline, holder), write=True)

    def check_fence(self, batch_id: int, fence: int) -> None:
        """A cheap read before each Delta write: FencedError unless the batch is still planned with
        this fence, so a superseded attempt stops before it writes anything."""
        batch = self.get_batch(batch_id)
        if batch.status is not BatchStatus.PLANNED or batch.fence != fence:
            raise batch_commit.fenced(batch, fence, "writes and commits nothing")

    def commit_batch(
        self,
        batch_id: int,
        fence: int,
        *,
        records_read: int,
        records_written: int,
        records_quarantined: int,
        delta_version: int | None,
        quarantine_delta_version: int | None,
    ) -> Batch:
        """Step 7, one transaction: mark the batch committed only if it is planned with this fence,
        and for a scheduled batch move each partition's committed offset start -> end by
        compare-and-set. Any mismatch rolls everything back and raises FencedError."""
        batch_commit.check_counts(batch_id, records_read, records_written, records_quarantined)

        def run(conn: Connection) -> Batch:
            return batch_commit.commit(
                conn, batch_id, fence, self.safe_url,
                counts=(records_read, records_written, records_quarantined),
                versions=(delta_version, quarantine_delta_version),
            )  # fmt: skip

        return self._db.run(run, write=True)

    def fail_batch(self, batch_id: int, fence: int, error: str) -> bool:
        """Mark the batch failed if it is still planned with this fence; False (no-op) otherwise.

        A failed scheduled batch frees the pipeline's single planned slot; the next plan starts
        from the same committed offsets, which is right because they did not move."""
        return self._set_status(batch_id, BatchStatus.FAILED, error, fence) == 1

    def abandon_batch(self, batch_id: int, reason: str) -> None:
        """Operator action: planned -> abandoned (reason kept in `error`); a running attempt will
        then be fenced at commit. BatchStateError if the batch is not planned."""
        if self._set_status(batch_id, BatchStatus.ABANDONED, f"abandoned: {reason}", None) != 1:
            batch = self.get_batch(batch_id)
            raise BatchStateError(
                f"batch {batch_id} is {batch.status.value}, not planned: nothing to abandon"
            )

    def record_quality(
        self, batch_id: int, *, success: bool, result_json: str, report_path: str | None
    ) -> None:
        """Step 8: store the data-quality result on the batch (committed batches included)."""

        def run(conn: Connection) -> None:
            values = {"dq_success": success, "dq_result": result_json, "dq_report_path": report_path}
            changed = conn.execute(
                update(batches).where(batches.c.batch_id == batch_id).values(**values, updated_at=utc_now())
            )
            if changed.rowcount != 1:
                self._require(conn, batch_id)

        self._db.run(run, write=True)

    def reset_offsets(
        self,
        pipeline: str,
        topic: str,
        partition_to_offset: Mapping[int, int],
        reason: str,
        identity: KafkaIdentity | None = None,
        whole_topic: bool = False,
    ) -> dict[int, int | None]:
        """Operator action after a topic was deleted and recreated (its offsets restarted): set the
        committed offsets of the given partitions (others are untouched) and return the previous
        ones (None where there was none). Refused while a scheduled batch is planned: abandon it
        first, since its ranges belong to the old topic. The reason is logged at WARNING. With
        `identity`, the topic's current topic id and cluster id are recorded in the same
        transaction, so the next plans accept this incarnation (and refuse the old one). A recreated
        topic must be reset `whole_topic` (all its partitions now): the offsets of partitions the new
        topic lacks are then dropped, so one added later starts at its log start, not at an old offset."""
        offset_reset.check_request(pipeline, topic, partition_to_offset, reason)

        def run(conn: Connection) -> dict[int, int | None]:
            return offset_reset.reset_offsets(
                conn, pipeline, topic, partition_to_offset, reason, identity, whole_topic
            )

        return self._db.run(run, write=True)

    # -- lag history ---------------------------------------------------------------------------

    def record_lag_sample(
        self,
        pipeline: str,
        sample: LagSample,
        *,
        keep: timedelta = lag_samples.KEEP,
        max_per_pipeline: int = lag_samples.MAX_PER_PIPELINE,
    ) -> None:
        """Record a reading of the pipeline's lag and drop its samples older than `keep` before it
        or beyond the newest `max_per_pipeline`, in one transaction."""
        self._db.run(
            lambda conn: lag_samples.insert_sample(
                conn, pipeline, sample, keep=keep, max_per_pipeline=max_per_pipeline
            ),
            write=True,
        )

    def lag_samples_since(self, pipeline: str, since: datetime) -> list[LagSample]:
        """The pipeline's lag samples taken at or after `since`, oldest first."""
        return self._db.run(lambda conn: lag_samples.samples_since(conn, pipeline, since), write=False)

    # -- helpers -------------------------------------------------------------------------------

    def _set_status(self, batch_id: int, status: BatchStatus, error: str, fence: int | None) -> int:
        conditions = [batches.c.batch_id == batch_id, batches.c.status == BatchStatus.PLANNED.value]
        if fence is not None:
            conditions.append(batches.c.fence == fence)
        # The error text is shown on the Ingestion page and by `status`: no URL password, no secret.
        shown = redact_text(error)
        query = (
            update(batches).where(*conditions).values(status=status.value, error=shown, updated_at=utc_now())
        )
        return self._db.run(lambda conn: int(conn.execute(query).rowcount), write=True)

    def _require(self, conn: Connection, batch_id: int) -> Batch:
        return q.require(conn, batch_id, self.safe_url)

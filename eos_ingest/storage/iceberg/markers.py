"""The marker of an Iceberg write (which batch, app id and fence wrote a snapshot, in its summary)
and the search for the newest marked write along main, bounded by the batch's plan time.

Why bounded: main gains two snapshots a batch (the stage's DELETE and append) until `maintain`
expires them, and a walk of all of main's ancestors costs a few py4j round trips a snapshot, several
walks a batch (the stage's skip check, the publish's fence check, a skipped write's version): a
batch would cost more with every batch before it.

Why the plan time is a sound bound: a batch's app id is written only by its attempts, and every
attempt runs after the batch was planned; so a marked snapshot, and every snapshot committed on main
after it, was committed after the plan. Snapshot timestamps are the writer's clock (its Spark
driver), the plan time the planner's (the Airflow worker or the CLI), so a snapshot committed after
the plan is stamped no earlier than the plan time less the two clocks' disagreement. The walk goes
from main's head down and stops at the first ancestor stamped earlier than the plan time less a
margin (clock_margin_ms) larger than that disagreement: that snapshot was committed before the plan,
and so were its ancestors; no marker of the batch is among them. No ordering of timestamps along
main is assumed. What the walk reads is then the snapshots committed since about the plan, however
long main's history is. A margin smaller than the real disagreement can hide the batch's own
marker: its next attempt then stages and publishes the same replace again (one copy: the same ranges
replaced by the same records), and a zombie's control commit is still refused by its fence.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from typing import Any

from eos_ingest.storage.table_format import Txn

log = logging.getLogger(__name__)

# The snapshot summary keys of a write's marker.
BATCH_KEY = "eos.batch-id"
APP_ID_KEY = "eos.app-id"
FENCE_KEY = "eos.fence"

CLOCK_MARGIN_ENV = "EOS_ICEBERG_CLOCK_MARGIN_S"
# One minute: Iceberg itself takes its writers' clocks to agree within one (TableMetadata refuses a
# snapshot log that goes back more than ONE_MINUTE, "commits can happen concurrently from different
# machines"), and hosts kept by NTP agree within milliseconds. A longer margin costs a batch the
# snapshots committed in it (a fast pipeline's last batches), never more.
DEFAULT_CLOCK_MARGIN_S = 60.0


def marker(batch_id: int, txn: Txn | None) -> dict[str, str]:
    """The snapshot summary entries that say which batch and attempt wrote a snapshot."""
    entries = {BATCH_KEY: str(batch_id)}
    if txn is not None:
        entries.update({APP_ID_KEY: txn.app_id, FENCE_KEY: str(txn.fence)})
    return entries


def clock_margin_ms() -> int:
    """$EOS_ICEBERG_CLOCK_MARGIN_S (default 60) in milliseconds: how far the planner's clock and a
    writer's may disagree (see the module)."""
    text = os.environ.get(CLOCK_MARGIN_ENV, "").strip()
    try:
        seconds = float(text) if text else DEFAULT_CLOCK_MARGIN_S
    except ValueError:
        raise ValueError(f"{CLOCK_MARGIN_ENV}={text!r}: give seconds, e.g. 60") from None
    if seconds < 0:
        raise ValueError(f"{CLOCK_MARGIN_ENV}={text!r}: give seconds >= 0, e.g. 60")
    return int(seconds * 1000)


def floor_ms(planned_at: datetime | None) -> int | None:
    """The oldest snapshot timestamp (epoch ms) a write planned at `planned_at` can carry: the plan
    time less the clock margin. None (no plan time): no bound, the whole history is read."""
    if planned_at is None:
        return None
    aware = planned_at if planned_at.tzinfo is not None else planned_at.replace(tzinfo=UTC)
    return int(aware.timestamp() * 1000) - clock_margin_ms()


def newest_write(
    jvm: Any,
    table: Any,
    *,
    app_id: str | None = None,
    batch_id: int | None = None,
    planned_at: datetime | None = None,
) -> tuple[Any, int | None]:
    """The newest of main's snapshots committed since `planned_at` (the batch's plan time, see the
    module; None: all of them) whose marker has `app_id` (or `batch_id`), and the fence it carries;
    (None, None) when there is none. Along main, an app id's fences never go down (a publish by an
    older fence than main holds is refused), so the newest is the highest."""
    if table.currentSnapshot() is None:
        return None, None
    floor = floor_ms(planned_at)
    read = 0
    # py4j's iterator: one round trip a snapshot; then its timestamp and one summary entry.
    for snapshot in jvm.org.apache.iceberg.util.SnapshotUtil.currentAncestors(table).iterator():
        read += 1
        if floor is not None and int(snapshot.timestampMillis()) < floor:
            break  # committed before the plan, as were all its ancestors: no marker of this batch
        summary = snapshot.summary()
        if app_id is not None and summary.get(APP_ID_KEY) != app_id:
            continue
        if batch_id is not None and summary.get(BATCH_KEY) != str(batch_id):
            continue
        fence = summary.get(FENCE_KEY)
        log.debug("the marker of %s found in the %d newest of main's snapshots", app_id or batch_id, read)
        return snapshot, int(fence) if fence is not None else None
    log.debug("no marker of %s in the %d newest of main's snapshots", app_id or batch_id, read)
    return None, None

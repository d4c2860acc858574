"""Operator reset of a topic's committed offsets (after the topic was deleted and recreated).

Each function runs inside the caller's transaction (ControlStore's); none commits.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sqlalchemy import Connection, and_, delete, insert, update

from eos_ingest.control import queries as q
from eos_ingest.control.schema import offsets, utc_now
from eos_ingest.errors import BatchStateError
from eos_ingest.plan.identity import KafkaIdentity, TopicIdentity

log = logging.getLogger(__name__)


def check_request(pipeline: str, topic: str, partition_to_offset: Mapping[int, int], reason: str) -> None:
    """ValueError unless a reason and some partitions with offsets >= 0 are given."""
    if not reason.strip() or not partition_to_offset or min(partition_to_offset.values()) < 0:
        raise ValueError(
            f"reset_offsets of {pipeline!r} {topic}: give a reason and at least one partition, "
            f"with offsets >= 0 (got {dict(partition_to_offset)})"
        )


def reset_offsets(
    conn: Connection,
    pipeline: str,
    topic: str,
    partition_to_offset: Mapping[int, int],
    reason: str,
    identity: KafkaIdentity | None,
    whole_topic: bool,
) -> dict[int, int | None]:
    """Set the committed offsets of the given partitions; the previous ones (None: there was none)."""
    q.lock_pipeline(conn, pipeline)
    pending = q.pending(conn, pipeline)
    if pending is not None:
        raise BatchStateError(
            f"pipeline {pipeline!r} has planned scheduled batch {pending.batch_id}: run it to "
            "completion or abandon it before resetting offsets"
        )
    before = {tp.partition: o for tp, o in q.committed(conn, pipeline).items() if tp.topic == topic}
    kept = sorted(set(before) - set(partition_to_offset))
    recreated = identity is not None and _recreated(
        q.recorded_identities(conn, pipeline).get(topic), identity, topic
    )
    if recreated and kept and not whole_topic:
        raise BatchStateError(
            f"topic {topic!r} of pipeline {pipeline!r} was recreated; partitions {kept} would keep "
            "offsets of the deleted topic. Reset every partition: run reset-offsets without --partitions"
        )
    if recreated and kept:
        where = and_(offsets.c.pipeline == pipeline, offsets.c.topic == topic, offsets.c.partition.in_(kept))
        conn.execute(delete(offsets).where(where))
    now = utc_now()
    for partition, offset in sorted(partition_to_offset.items()):
        key = {"pipeline": pipeline, "topic": topic, "partition": partition}
        if partition in before:
            where = and_(*(offsets.c[k] == v for k, v in key.items()))
            conn.execute(update(offsets).where(where).values(committed_offset=offset, updated_at=now))
        else:
            conn.execute(insert(offsets).values(**key, committed_offset=offset, updated_at=now))
    if identity is not None:
        q.record_identities(conn, pipeline, [identity.of(topic)])
    log.warning(
        "pipeline %s: committed offsets of %s reset to %s (were %s): %s",
        pipeline, topic, dict(partition_to_offset), before, reason,
    )  # fmt: skip
    return {p: before.get(p) for p in partition_to_offset}


def _recreated(recorded: TopicIdentity | None, identity: KafkaIdentity, topic: str) -> bool:
    """True when the topic id Kafka reports now differs from the recorded one."""
    return recorded is not None and recorded.topic_id != identity.of(topic).topic_id

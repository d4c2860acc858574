"""Which Kafka cluster and which incarnation of each topic a pipeline's offsets belong to (pure).

Offsets only mean something for one topic on one cluster. A topic deleted and recreated under the
same name gets a new topic id (the UUID the broker assigns at creation) and restarts at offset 0;
once it is refilled past the committed offset its offsets look normal, so only the id tells the
incarnations apart. `kafka/offsets` reads the ids, `control/store` records them per
(pipeline, topic) and compares them inside every plan's transaction; the decision is here, so a
table of cases tests it. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from eos_ingest.errors import ClusterMismatchError, TopicRecreatedError
from eos_ingest.plan.ranges import PlannedRange


@dataclass(frozen=True)
class TopicIdentity:
    """One topic's id and its cluster's id, as recorded for a pipeline or as Kafka reports them now.

    None means "not known": a broker that reports no topic id, or a database migrated from schema
    version 1 before its first plan. An unknown value is never a mismatch; it is filled in."""

    topic: str
    topic_id: str | None
    cluster_id: str | None


@dataclass(frozen=True)
class KafkaIdentity:
    """What Kafka reports now: the cluster id and each topic's id, and where we asked."""

    cluster_id: str | None
    topic_ids: Mapping[str, str | None] = field(default_factory=dict)
    bootstrap: str = "?"

    def of(self, topic: str) -> TopicIdentity:
        return TopicIdentity(topic, self.topic_ids.get(topic), self.cluster_id)


def reset_command(pipeline: str, topic: str) -> str:
    return f'eos-ingest reset-offsets --pipeline {pipeline} --topic {topic} --to earliest --reason "..."'


def check_identities(
    pipeline: str,
    recorded: Mapping[str, TopicIdentity],
    current: KafkaIdentity,
    topics: Sequence[str],
    *,
    pending_batch: int | None = None,
) -> list[TopicIdentity]:
    """Compare the recorded identity of each of `topics` with Kafka's; return what to record.

    Raises ClusterMismatchError when a recorded cluster id differs from the current one (checked
    first: on another cluster every topic id differs too), else TopicRecreatedError when a
    recorded topic id differs; one error lists every such topic. Returns the identities to write:
    topics never recorded, and recorded ones with a value that was unknown and is known now.
    `pending_batch` (a planned batch of the old ids) adds "abandon it first" to the fix.
    """
    abandon = (
        f'eos-ingest abandon --pipeline {pipeline} --batch-id {pending_batch} --reason "...", then '
        if pending_batch is not None
        else ""
    )
    other_cluster = [
        (t, recorded[t].cluster_id)
        for t in topics
        if t in recorded and _differs(recorded[t].cluster_id, current.cluster_id)
    ]
    if other_cluster:
        names = ", ".join(repr(t) for t, _ in other_cluster)
        old = sorted({str(c) for _, c in other_cluster})
        raise ClusterMismatchError(
            f"pipeline {pipeline!r}: bootstrap.servers {current.bootstrap} is Kafka cluster "
            f"{current.cluster_id}, but the committed offsets of topic(s) {names} were recorded on cluster "
            f"{', '.join(old)}; offsets of one cluster mean nothing on another. Fix: point bootstrap.servers "
            f"back at cluster {', '.join(old)}, or, if the move is intended, {abandon}run "
            f"`{reset_command(pipeline, other_cluster[0][0])}` for each topic listed"
        )
    recreated = [
        (t, recorded[t].topic_id, current.topic_ids.get(t))
        for t in topics
        if t in recorded and _differs(recorded[t].topic_id, current.topic_ids.get(t))
    ]
    if recreated:
        lines = "\n".join(
            f"  - topic {t!r}: recorded topic id {old}, Kafka now reports topic id {new}; fix: {abandon}"
            f"`{reset_command(pipeline, t)}`"
            for t, old, new in recreated
        )
        raise TopicRecreatedError(
            f"pipeline {pipeline!r}: {len(recreated)} topic(s) were deleted and recreated since their offsets "
            f"were committed (cluster {current.cluster_id}, bootstrap.servers {current.bootstrap}); nothing "
            f"was planned:\n{lines}\nThe output table holds the old topic's rows at those offsets until "
            "batches of the new topic replace them (`eos-ingest verify` reports them as older_topic)."
        )
    out: list[TopicIdentity] = []
    for t in topics:
        now = current.of(t)
        before = recorded.get(t)
        merged = (
            now
            if before is None
            else TopicIdentity(t, before.topic_id or now.topic_id, before.cluster_id or now.cluster_id)
        )
        if merged != before:
            out.append(merged)
    return out


def check_batch_identity(
    batch_id: int,
    pipeline: str,
    ranges: Sequence[tuple[PlannedRange, str | None]],
    recorded: Mapping[str, TopicIdentity],
    current: KafkaIdentity,
) -> None:
    """Refuse to read a batch's ranges from another topic incarnation or another cluster.

    `ranges` pairs each range with the topic id it was planned under (None: planned before schema
    version 2, not checked). Raises ClusterMismatchError or TopicRecreatedError naming the ids."""
    topics = sorted({r.topic for r, _ in ranges})
    for t in topics:
        if t in recorded and _differs(recorded[t].cluster_id, current.cluster_id):
            raise ClusterMismatchError(
                f"batch {batch_id} of pipeline {pipeline!r} was planned on Kafka cluster {recorded[t].cluster_id}, "
                f"but bootstrap.servers {current.bootstrap} is cluster {current.cluster_id}; nothing was read. "
                f"Fix: point bootstrap.servers back at cluster {recorded[t].cluster_id}, or abandon the batch "
                f'(`eos-ingest abandon --pipeline {pipeline} --batch-id {batch_id} --reason "..."`) and run '
                f"`{reset_command(pipeline, t)}`"
            )
    stale = sorted(
        {(r.topic, planned) for r, planned in ranges if _differs(planned, current.topic_ids.get(r.topic))}
    )
    if stale:
        lines = "\n".join(
            f"  - topic {t!r}: planned under topic id {old}, Kafka now reports topic id "
            f"{current.topic_ids.get(t)}; fix: `{reset_command(pipeline, t)}`"
            for t, old in stale
        )
        raise TopicRecreatedError(
            f"batch {batch_id} of pipeline {pipeline!r}: its ranges belong to a topic that was deleted and "
            f"recreated since it was planned (bootstrap.servers {current.bootstrap}); nothing was read. The "
            f"spark job marks the batch failed; a batch still planned must be abandoned first "
            f'(`eos-ingest abandon --pipeline {pipeline} --batch-id {batch_id} --reason "..."`):\n{lines}'
        )


def _differs(recorded: str | None, current: str | None) -> bool:
    return recorded is not None and current is not None and recorded != current

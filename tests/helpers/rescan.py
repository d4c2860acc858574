"""A test's end state against Kafka itself, by the chaos run's independent check
(bench/chaos/check.py), which shares no code with eos_ingest: a plain confluent-kafka consumer with
isolation.level=read_committed reads the topic, and every committed record inside the ranges of the
pipeline's committed batches must be in the table or the quarantine table exactly once, with no
other row there (no duplicate, no gap, nothing unexpected)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from bench.chaos import check
from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.store import ControlStore
from eos_ingest.plan.ranges import PlannedRange
from eos_ingest.storage.table_names import QUARANTINE, TABLE
from tests.fixtures.pipelines import table_rows

Identity = check.Identity


def committed_ranges(store: ControlStore, pipeline: str) -> list[PlannedRange]:
    """The ranges of the pipeline's committed batches, as the control DB recorded them."""
    return [record.range for record in store.range_records(pipeline) if record.committed]


def committed_records(bootstrap: str, ranges: Iterable[PlannedRange]) -> set[Identity]:
    """Kafka's committed records inside `ranges` (read_committed: no aborted record, no marker)."""
    ranges = list(ranges)
    return {
        identity
        for topic in sorted({r.topic for r in ranges})
        for identity in check.committed_identities(bootstrap, topic)
        if any((r.topic, r.partition) == identity[:2] and r.start <= identity[2] < r.end for r in ranges)
    }


def assert_exactly_the_committed_records(
    bootstrap: str, ranges: Iterable[PlannedRange], rows: Iterable[Identity]
) -> None:
    """`rows` (the identities of the tables' rows, a copy too many listed twice) are the committed
    records of `ranges`, each once."""
    expected = committed_records(bootstrap, ranges)
    outcome = check.compare(expected, Counter(rows))
    assert expected, "the rescan found no committed record in the committed ranges"
    assert (outcome["duplicates"], outcome["missing"], outcome["unexpected"]) == (0, 0, 0), outcome


def published_identities(spark, config: PipelineConfig) -> list[Identity]:
    """The identity of every row of the pipeline's table and quarantine table as `spark` reads them
    (Delta's latest version, Iceberg's main)."""
    found: list[Identity] = []
    for which in (TABLE, QUARANTINE):
        rows = table_rows(spark, config, which)
        if rows is not None:
            found += [(r[0], int(r[1]), int(r[2])) for r in rows.select(*check.IDENTITY_COLUMNS).collect()]
    return found


def assert_each_committed_record_once(spark, config: PipelineConfig) -> None:
    """The pipeline's two tables hold exactly the committed records of its committed batches' ranges."""
    store = ControlStore(config.control_db_url)
    try:
        ranges = committed_ranges(store, config.name)
    finally:
        store.close()
    bootstrap = config.kafka_settings["bootstrap.servers"]
    assert_exactly_the_committed_records(bootstrap, ranges, published_identities(spark, config))

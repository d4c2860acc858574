"""The SQL predicate of a batch's replace: exactly the identities inside its offset ranges.

Both formats replace a batch's rows by it: Delta's replaceWhere (storage/delta/writer.py) and
Iceberg's DELETE on the batch's branch (storage/iceberg/format.py). It names offsets, not the
partition column, on purpose: storage/delta/writer.py says why.
"""

from __future__ import annotations

from collections.abc import Sequence

from eos_ingest.plan.ranges import PlannedRange


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def ranges_predicate(ranges: Sequence[PlannedRange]) -> str:
    """SQL predicate matching exactly the identities inside `ranges` (empty ranges included)."""
    if not ranges:
        raise ValueError("ranges_predicate needs at least one range")
    clauses = [
        f"(kafka_topic = {_sql_string(r.topic)} AND kafka_partition = {int(r.partition)}"
        f" AND kafka_offset >= {int(r.start)} AND kafka_offset < {int(r.end)})"
        for r in sorted(ranges, key=lambda r: (r.topic, r.partition))
    ]
    return " OR ".join(clauses)

"""The chaos run's own end check, sharing no code with eos_ingest.

- Kafka side: a plain confluent-kafka consumer with isolation.level=read_committed reads every
  partition from its log start to its last stable offset: the identities (topic, partition,
  offset) that must be in the output exactly once.
- Delta side: the table's _delta_log JSON commits are replayed (add/remove) and the live Parquet
  files are read with pyarrow: how many times each identity is in the table + quarantine table.
- Iceberg side: pyiceberg's scan of each table's `main` through the JDBC catalog's rows in the
  control DB, or straight from the REST catalog's server, never through the run's fault proxy
  (Iceberg's own reader, not the pipeline's code).
- compare(): duplicates, missing and unexpected identities.

plant_duplicate / plant_missing break a table on purpose (a commit that adds a copy of a data
file, or removes one; on Iceberg an append of rows already there, or a delete of some), so a run
can prove that the check catches it.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq
from confluent_kafka import Consumer, KafkaError, TopicPartition

Identity = tuple[str, int, int]
IDENTITY_COLUMNS = ["kafka_topic", "kafka_partition", "kafka_offset"]
# Reader features whose files this replay reads correctly (it reads whole Parquet files).
SUPPORTED_READER_FEATURES = {"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"}


def compare(expected: set[Identity], found: Mapping[Identity, int], examples: int = 5) -> dict[str, Any]:
    """Extra copies, identities missing from the output, and output identities Kafka does not have."""
    duplicates = {i: n - 1 for i, n in found.items() if n > 1}
    missing = expected - found.keys()
    unexpected = {i for i, n in found.items() if n > 0} - expected
    return {
        "expected": len(expected),
        "found": sum(found.values()),
        "duplicates": sum(duplicates.values()),
        "missing": len(missing),
        "unexpected": len(unexpected),
        "examples": {
            "duplicates": [list(i) for i in sorted(duplicates)[:examples]],
            "missing": [list(i) for i in sorted(missing)[:examples]],
            "unexpected": [list(i) for i in sorted(unexpected)[:examples]],
        },
    }


# -- Kafka ----------------------------------------------------------------------------------------


def committed_identities(bootstrap: str, topic: str, timeout_s: float = 30.0) -> set[Identity]:
    """Every committed record of `topic` (all partitions), read with read_committed."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-check-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s)
        partitions = sorted(metadata.topics[topic].partitions)
        ends: dict[int, int] = {}
        starts: dict[int, int] = {}
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            starts[p], ends[p] = low, high
        found: set[Identity] = set()
        todo = {p for p in partitions if ends[p] > starts[p]}
        consumer.assign([TopicPartition(topic, p, starts[p]) for p in sorted(todo)])
        while todo:
            msg = consumer.poll(timeout_s)
            if msg is None:
                raise TimeoutError(f"check: no record within {timeout_s}s from {topic}; left: {sorted(todo)}")
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    todo.discard(msg.partition())
                    continue
                raise RuntimeError(f"check: reading {topic}: {error}")
            partition, offset = int(msg.partition()), int(msg.offset())
            if offset < ends[partition]:
                found.add((topic, partition, offset))
            if offset + 1 >= ends[partition]:
                todo.discard(partition)
        return found
    finally:
        consumer.close()


def open_transactions(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[int]:
    """Partitions whose last stable offset is below the high watermark: a transaction is open."""
    settings = {"bootstrap.servers": bootstrap, "group.id": f"chaos-lso-{uuid.uuid4().hex}"}
    committed = Consumer({**settings, "isolation.level": "read_committed"})
    uncommitted = Consumer({**settings, "isolation.level": "read_uncommitted"})
    try:
        partitions = sorted(committed.list_topics(topic, timeout=timeout_s).topics[topic].partitions)
        return [
            p
            for p in partitions
            if committed.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1]
            < uncommitted.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1]
        ]
    finally:
        committed.close()
        uncommitted.close()


# -- Delta ----------------------------------------------------------------------------------------


def _commits(table: Path) -> list[Path]:
    log = table / "_delta_log"
    files = sorted((p for p in log.glob("*.json") if p.stem.isdigit()), key=lambda p: int(p.stem))
    versions = [int(p.stem) for p in files]
    if versions != list(range(len(versions))):
        raise ValueError(
            f"check: {log} holds commits {versions[:3]}...{versions[-3:]}, not every version from 0; "
            "this replay needs the whole JSON log (no log cleanup)"
        )
    return files


def live_files(table: Path) -> dict[str, dict[str, Any]]:
    """The table's current data files (relative path -> add action), by replaying its JSON log."""
    live: dict[str, dict[str, Any]] = {}
    for commit in _commits(table):
        for line in commit.read_text().splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "protocol" in action:
                features = set(action["protocol"].get("readerFeatures") or [])
                unsupported = features - SUPPORTED_READER_FEATURES
                if unsupported:
                    raise ValueError(f"check: {table} needs reader features {sorted(unsupported)}")
            elif "metaData" in action:
                mode = action["metaData"].get("configuration", {}).get("delta.columnMapping.mode", "none")
                if mode != "none":
                    raise ValueError(f"check: {table} uses column mapping {mode!r}; not supported")
            elif "add" in action:
                add = action["add"]
                if add.get("deletionVector"):
                    raise ValueError(f"check: {table} file {add['path']} has a deletion vector")
                live[unquote(add["path"])] = add
            elif "remove" in action:
                live.pop(unquote(action["remove"]["path"]), None)
    return live


def table_identities(tables: Iterable[Path]) -> Counter[Identity]:
    """How many times each identity is in the tables (missing tables count as empty)."""
    counts: Counter[Identity] = Counter()
    for table in tables:
        if not (table / "_delta_log").is_dir():
            continue
        for relative in live_files(table):
            data = pq.read_table(table / relative, columns=IDENTITY_COLUMNS).to_pydict()
            counts.update(
                zip(data["kafka_topic"], data["kafka_partition"], data["kafka_offset"], strict=True)
            )
    return counts


def _next_version(table: Path) -> int:
    return len(_commits(table))


def _write_commit(table: Path, actions: list[dict[str, Any]]) -> None:
    version = _next_version(table)
    commit_info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "CHAOS PLANT"}}
    path = table / "_delta_log" / f"{version:020d}.json"
    with path.open("x") as out:  # "x": never overwrite a commit
        out.write("\n".join(json.dumps(a) for a in [commit_info, *actions]) + "\n")


def plant_duplicate(table: Path) -> int:
    """Add a second copy of one data file (new name, same rows); returns the rows duplicated."""
    relative, add = next(iter(sorted(live_files(table).items())))
    source = table / relative
    copy_name = source.with_name(f"chaos-dup-{uuid.uuid4().hex}.parquet")
    shutil.copyfile(source, copy_name)
    new_add = {**add, "path": str(copy_name.relative_to(table)), "modificationTime": int(time.time() * 1000)}
    _write_commit(table, [{"add": new_add}])
    return int(pq.read_metadata(copy_name).num_rows)


def plant_missing(table: Path) -> int:
    """Remove one data file from the table (a skipped range); returns the rows removed."""
    relative, add = next(iter(sorted(live_files(table).items())))
    now = int(time.time() * 1000)
    remove = {"path": add["path"], "deletionTimestamp": now, "dataChange": True}
    _write_commit(table, [{"remove": remove}])
    return int(pq.read_metadata(table / relative).num_rows)


# -- Iceberg --------------------------------------------------------------------------------------


def _iceberg_table(catalog: str | Mapping[str, str], catalog_name: str, table: str) -> Any:
    """pyiceberg's table `table` of the catalog `catalog_name`, or None when it has no such table.
    `catalog`: the database URL of a JDBC catalog, or a REST catalog's pyiceberg properties."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    properties = {"type": "sql", "uri": catalog} if isinstance(catalog, str) else dict(catalog)
    try:
        return load_catalog(catalog_name, **properties).load_table(table)
    except (NoSuchTableError, NoSuchNamespaceError):
        return None


def iceberg_identities(
    catalog: str | Mapping[str, str], catalog_name: str, tables: Iterable[str]
) -> Counter[Identity]:
    """How many times each identity is in the Iceberg tables' main (missing tables count as empty)."""
    counts: Counter[Identity] = Counter()
    for name in tables:
        table = _iceberg_table(catalog, catalog_name, name)
        if table is None or table.current_snapshot() is None:
            continue
        data = table.scan(selected_fields=tuple(IDENTITY_COLUMNS)).to_arrow().to_pydict()
        counts.update(zip(data["kafka_topic"], data["kafka_partition"], data["kafka_offset"], strict=True))
    return counts


def plant_iceberg(
    catalog: str | Mapping[str, str], catalog_name: str, table: str, kind: str, rows: int = 10
) -> int:
    """`kind` duplicate: append a copy of `rows` rows of main; missing: delete one partition's
    first `rows` offsets. Returns the rows planted."""
    from pyiceberg.expressions import And, EqualTo, LessThan

    iceberg = _iceberg_table(catalog, catalog_name, table)
    if iceberg is None:
        raise ValueError(f"check: no Iceberg table {table} in catalog {catalog_name} to plant into")
    if kind == "duplicate":
        copy = iceberg.scan(limit=rows).to_arrow()
        iceberg.append(copy)
        return copy.num_rows
    first = (
        iceberg.scan(selected_fields=("kafka_partition", "kafka_offset"), limit=1).to_arrow().to_pylist()[0]
    )
    where = And(EqualTo("kafka_partition", first["kafka_partition"]), LessThan("kafka_offset", rows))
    before = iceberg.scan(row_filter=where).to_arrow().num_rows
    iceberg.delete(where)
    return before

"""Reads an Iceberg table of the bench without a JVM and without pyiceberg, one reader for both
sides' tables: the JDBC catalog's SQLite row gives the current metadata file, its current snapshot's
manifest list and manifests (Avro, fastavro) give the live data files, and pyarrow reads their Kafka
metadata columns. Neither side writes delete files (the sink only appends; eos-ingest's replace of a
range is copy-on-write), so a delete file is refused rather than applied."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow.parquet as pq

PARTITION = "_kafka_metadata_partition"
OFFSET = "_kafka_metadata_offset"
SHIFT = 40  # key = partition << 40 | offset: one int64 per record


def _local(path: str) -> str:
    return path.removeprefix("file://").removeprefix("file:")


def metadata(catalog_db: Path, namespace: str, table: str) -> dict[str, Any] | None:
    """The table's current metadata document, or None while the sink has not created it."""
    if not catalog_db.exists():
        return None
    with sqlite3.connect(f"file:{catalog_db}?mode=ro", uri=True, timeout=5) as db:
        try:
            row = db.execute(
                "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND table_name = ?",
                (namespace, table),
            ).fetchone()
        except sqlite3.OperationalError:  # the catalog's tables are not there yet
            return None
    if row is None:
        return None
    doc: dict[str, Any] = json.loads(Path(_local(row[0])).read_text())
    return doc


def current_snapshot(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    if not doc or doc.get("current-snapshot-id") in (None, -1):
        return None
    wanted = doc["current-snapshot-id"]
    return next(s for s in doc["snapshots"] if s["snapshot-id"] == wanted)


def total_records(catalog_db: Path, namespace: str, table: str) -> tuple[int, int]:
    """(total records, snapshots) of the current snapshot, from its summary: the cheap poll."""
    doc = metadata(catalog_db, namespace, table)
    snap = current_snapshot(doc)
    if snap is None or doc is None:
        return 0, 0
    return int(snap["summary"].get("total-records", 0)), len(doc.get("snapshots", []))


@dataclass(frozen=True)
class TableRead:
    keys: np.ndarray  # int64, one per row: partition << SHIFT | offset
    data_files: int
    snapshots: int
    snapshot_id: int | None


def read_keys(
    catalog_db: Path, namespace: str, table: str, columns: tuple[str, str] = (PARTITION, OFFSET)
) -> TableRead:
    """Every row's (partition, offset) of the current snapshot, as int64 keys; `columns` name them
    (the sink's metadata columns by default, eos-ingest's kafka_partition and kafka_offset)."""
    doc = metadata(catalog_db, namespace, table)
    snap = current_snapshot(doc)
    if snap is None or doc is None:
        return TableRead(np.empty(0, dtype=np.int64), 0, len((doc or {}).get("snapshots", [])), None)
    files: list[str] = []
    with open(_local(snap["manifest-list"]), "rb") as handle:
        manifests = list(fastavro.reader(handle))
    for manifest in manifests:
        if manifest.get("content", 0) != 0:
            raise RuntimeError(
                f"{table}: delete manifest {manifest['manifest_path']}: not expected from an append-only sink"
            )
        with open(_local(manifest["manifest_path"]), "rb") as handle:
            for entry in fastavro.reader(handle):
                if entry["status"] == 2:  # DELETED
                    continue
                data_file = entry["data_file"]
                if data_file.get("content", 0) != 0:
                    raise RuntimeError(f"{table}: delete file {data_file['file_path']}")
                files.append(_local(data_file["file_path"]))
    parts = []
    for path in files:
        read = pq.read_table(path, columns=list(columns))
        partition = read.column(columns[0]).to_numpy().astype(np.int64)
        offset = read.column(columns[1]).to_numpy().astype(np.int64)
        parts.append((partition << SHIFT) | offset)
    keys = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    return TableRead(keys, len(files), len(doc["snapshots"]), int(snap["snapshot-id"]))

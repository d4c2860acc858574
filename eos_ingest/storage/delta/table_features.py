"""Delta table features under which a batch's staged replace could lose or misreport rows, refused
with one line naming the feature and the fix before anything is written.

Checked twice: when a batch is planned (the table's log read with delta-rs: nothing is planned)
and in the job on the snapshot its replace reads and on the metadata its commit would write (a
property set between the two, or a session default that a first write would put on a new table).

- deletion vectors: a replace over part of a file marks rows deleted in that live file instead of
  rewriting it; the file then stands among the replace's AddFiles, and the audit, `verify` and
  the Ingestion page read with delta-rs, which cannot apply deletion vectors;
- column mapping: the Parquet files hold physical column names that the gate's read-back of the
  staged files does not map to the table's names;
- liquid clustering: the replace writes the pipeline's partition columns, which a clustered table
  refuses;
- appendOnly: every rerun and backfill replaces rows, which such a table refuses.

Kept and tested instead: CHECK constraints (a row that breaks one fails the batch, nothing written)
and row tracking (the staged commit passes Delta's commit tags as its own write would).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eos_ingest.errors import ConfigError
from eos_ingest.storage.object_stores import delta_rs_table

if TYPE_CHECKING:
    from eos_ingest.config.table_location import TableLocation


@dataclass(frozen=True)
class TableShape:
    """What a Delta table declares in its log: its protocol's features and its properties."""

    reader_features: frozenset[str]
    writer_features: frozenset[str]
    configuration: Mapping[str, str]


def _on(configuration: Mapping[str, str], key: str) -> bool:
    return str(configuration.get(key, "false")).strip().lower() == "true"


def refusals(shape: TableShape) -> list[str]:
    """One text per feature of `shape` that a staged replace cannot keep its guarantees on."""
    conf = shape.configuration
    found = []
    if "deletionVectors" in shape.reader_features or _on(conf, "delta.enableDeletionVectors"):
        found.append(
            "deletion vectors (delta.enableDeletionVectors / the deletionVectors table feature): "
            "run ALTER TABLE delta.`<path>` DROP FEATURE deletionVectors (Delta rewrites the files "
            "and may ask for TRUNCATE HISTORY after the retention), or ingest into a new table"
        )
    mode = str(conf.get("delta.columnMapping.mode", "none")).strip().lower()
    if mode != "none" or "columnMapping" in shape.reader_features:
        found.append(
            f"column mapping (delta.columnMapping.mode = {mode}): ingest into a new table, which "
            "eos-ingest creates without it"
        )
    if "clustering" in shape.writer_features:
        found.append(
            "liquid clustering (CLUSTER BY): run ALTER TABLE delta.`<path>` CLUSTER BY NONE and "
            "partition by the pipeline's output.partition_by, or ingest into a new table"
        )
    if _on(conf, "delta.appendOnly"):
        found.append(
            "delta.appendOnly = true (every rerun and backfill replaces rows): run ALTER TABLE "
            "delta.`<path>` SET TBLPROPERTIES ('delta.appendOnly' = 'false')"
        )
    return found


def check(where: str, shape: TableShape) -> None:
    """ConfigError, one line, when the table at `where` has a feature refusals() names."""
    found = refusals(shape)
    if found:
        raise ConfigError(
            f"the Delta table at {where} has {'; and '.join(f.replace('<path>', where) for f in found)}; "
            "eos-ingest refuses to write it (a replace under these features could lose or misreport "
            "rows), and nothing was written"
        )


def check_location(location: TableLocation) -> None:
    """check() on the table's log as delta-rs reads it; nothing to check when there is no table."""
    from deltalake.exceptions import DeltaProtocolError  # noqa: PLC0415 delta-rs: loaded where a Delta log is read, not by every process that imports this module through table_formats

    try:
        table = delta_rs_table(location)
    except DeltaProtocolError as exc:  # a reader feature delta-rs does not know: name it
        raise ConfigError(
            f"the Delta table at {location} uses a table feature that eos-ingest's readers "
            f"(delta-rs) cannot read ({exc}); eos-ingest refuses to write it, and nothing was written"
        ) from exc
    if table is None:
        return
    protocol, metadata = table.protocol(), table.metadata()
    check(
        str(location),
        TableShape(
            frozenset(protocol.reader_features or ()),
            frozenset(protocol.writer_features or ()),
            dict(metadata.configuration or {}),
        ),
    )


def shape_of_txn(txn: Any) -> TableShape:
    """The TableShape of a Delta (Spark) transaction: its protocol and metadata as the commit would
    write them (a new table's session defaults included, once the write has run)."""
    protocol, metadata = txn.protocol(), txn.metadata()
    return TableShape(
        _names(protocol.readerFeatureNames()),
        _names(protocol.writerFeatureNames()),
        _scala_map(metadata.configuration()),
    )


def _names(scala_set: Any) -> frozenset[str]:
    return frozenset(n for n in str(scala_set.mkString("\n")).split("\n") if n)


def _scala_map(scala_map: Any) -> dict[str, str]:
    entries: Iterable[Any] = (scala_map.toList().apply(i) for i in range(scala_map.size()))
    return {str(e._1()): str(e._2()) for e in entries}

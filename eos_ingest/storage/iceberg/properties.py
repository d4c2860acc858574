"""Iceberg table properties against a batch's replace: what is kept, and what is refused at plan
time with one line naming the table, the property and the fix, before anything is written.

Kept, each tested on a real table (tests/integration/storage/iceberg/test_properties.py): the gate's
read of the staged branch, the audit, `verify` and the page read exactly what main shows under
- merge-on-read deletes (write.delete.mode, write.update.mode, write.merge.mode): the replace's
  DELETE writes position delete files, or deletion vectors on format version 3, which Spark and
  pyiceberg both apply;
- format version 3;
- a sort order, and write.distribution-mode range: the batch's append is hash-distributed
  whatever the table asks (storage/iceberg/format.py says why), so each file is still sorted;
- identifier fields, write.wap.enabled, and branch and snapshot retention (history.expire.*).

Refused: equality deletes on main (written by another engine, Flink's upserts say). pyiceberg,
which the gate, the audit and `verify` read with, cannot apply them, so they would misreport rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eos_ingest.errors import ConfigError

EQUALITY_DELETES = "total-equality-deletes"  # Iceberg's snapshot summary: live equality-delete rows


def refusals(table: str, summary: Mapping[str, str]) -> list[str]:
    """One text per property of main's current snapshot (its summary) a batch cannot keep its
    guarantees under."""
    found = []
    equality = int(summary.get(EQUALITY_DELETES, "0") or 0)
    if equality:
        found.append(
            f"{equality} equality-deleted rows on main ({EQUALITY_DELETES} of its current snapshot), "
            "which eos-ingest's readers (pyiceberg: the gate, the audit, verify) cannot apply: "
            f"rewrite them away with CALL <catalog>.system.rewrite_data_files(table => '{table}', "
            "options => map('delete-file-threshold', '1')), then plan again"
        )
    return found


def check(table: str, summary: Mapping[str, str]) -> None:
    """ConfigError, one line, when refusals() names something."""
    found = refusals(table, summary)
    if found:
        raise ConfigError(
            f"the Iceberg table {table} has {'; and '.join(found)}; eos-ingest refuses to write it, "
            "and nothing was written"
        )


def check_pyiceberg(catalog: Any, table: str) -> None:
    """check() on `table` (namespace.table) as pyiceberg's `catalog` loads it; nothing to check
    when the table does not exist yet or main has no snapshot."""
    from pyiceberg.exceptions import NoSuchTableError  # noqa: PLC0415 pyiceberg is the optional iceberg extra, imported where an Iceberg table is read

    try:
        loaded = catalog.load_table(table)
    except NoSuchTableError:
        return
    snapshot = loaded.current_snapshot()
    if snapshot is not None and snapshot.summary is not None:
        check(table, {EQUALITY_DELETES: str(snapshot.summary.get(EQUALITY_DELETES) or 0)})


def check_java(table: str, java_table: Any) -> None:
    """check() on an org.apache.iceberg.Table's current snapshot (the job's view, before staging)."""
    snapshot = java_table.currentSnapshot()
    if snapshot is not None:
        check(table, {EQUALITY_DELETES: str(snapshot.summary().get(EQUALITY_DELETES) or 0)})

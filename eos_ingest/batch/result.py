"""What one batch's attempt returns once it committed: the job prints it (a JSON line per batch)
and logs it ("batch N committed: BatchResult(...)")."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BatchResult:
    batch_id: int
    fence: int
    records_read: int
    records_written: int
    records_quarantined: int
    # The version of the table (and of the quarantine table) that holds the batch, whatever the
    # format: Delta's commit version; on Iceberg the id of the snapshot on main that holds it, the
    # one this attempt's publish put there (or, for a write skipped because a newer fence had
    # written, the newest snapshot marked with the batch). A snapshot id rather than a sequence
    # number: it is what Iceberg's time travel takes (VERSION AS OF, pyiceberg's snapshot_id)
    # and what the Ingestion page and `status` show as the table's version.
    table_version: int
    quarantine_version: int
    seconds: float
    # Good records carrying fields no column reads, dropped (value.schema_evolution: ignore).
    records_with_unknown_fields: int = 0
    # Columns this batch added to the table (value.schema_evolution: add_columns).
    columns_added: tuple[str, ...] = ()

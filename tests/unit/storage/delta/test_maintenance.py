"""The page's figures of a table and the dry run of `eos-ingest maintain`: delta-rs only, no Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from eos_ingest.storage.delta.figures import last_maintenance, table_figures
from eos_ingest.storage.delta.maintenance import maintain_table


def test_figures_count_the_current_version_s_files_and_none_without_a_table(tmp_path: Path) -> None:
    path = tmp_path / "t"
    assert table_figures(path) is None and last_maintenance(path) is None
    write_deltalake(str(path), pa.table({"a": [1, 2]}))
    write_deltalake(str(path), pa.table({"a": [3]}), mode="append")

    figures = table_figures(path)

    assert figures is not None and (figures.version, figures.files) == (1, 2)
    assert figures.bytes == sum(p.stat().st_size for p in path.glob("*.parquet"))
    assert last_maintenance(path) is None  # two writes, no OPTIMIZE or VACUUM


def test_a_dry_run_changes_nothing_and_counts_what_vacuum_would_delete(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": [1, 2]}))
    write_deltalake(str(path), pa.table({"a": [3]}), mode="overwrite")  # the first file is removed

    report = maintain_table(None, path, 0, dry_run=True)  # no Spark

    assert report == {
        "before": {"version": 1, "files": 1, "bytes": table_figures(path).bytes},
        "retention_hours": 0,
        "would_vacuum_files": 1,
    }
    assert len(list(path.glob("*.parquet"))) == 2 and table_figures(path).version == 1
    assert maintain_table(None, tmp_path / "none", 0, dry_run=True) is None

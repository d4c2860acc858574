"""The `output:` section: where batches land (a local folder or an s3a:// URI for the table and its
quarantine table) and the partition columns, checked against the value's columns."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator

from eos_ingest import paths
from eos_ingest.config.checks import Section, problem
from eos_ingest.config.table_location import TableLocation, TableUriError, object_store_uri
from eos_ingest.schema.ddl import base_type, hint

_UNPARTITIONABLE = ("ARRAY", "MAP", "STRUCT", "BINARY", "VARIANT")  # Spark refuses them as partitions
_BUILTIN_PARTITIONS = ("event_date", "kafka_topic", "kafka_partition")


def local_path(value: Any) -> Path:
    if not (isinstance(value, str) and value.strip()):
        raise problem("give a non-empty path")
    path = Path(value).expanduser()
    return (path if path.is_absolute() else paths.state_dir() / path).resolve()


def _table_location(value: Any) -> TableLocation:
    """A local folder (resolved), or s3a://bucket/prefix kept as a URI (no trailing slash)."""
    if not (isinstance(value, str) and "://" in value):
        return local_path(value)
    try:
        return object_store_uri(value)
    except TableUriError as e:
        raise (problem(e.fix) if e.shown is None else problem(e.fix, value=e.shown)) from None


def _partition_list(value: Any) -> Any:
    if not isinstance(value, list):
        raise problem("give a list of columns, e.g. [event_date]")
    return value


# None only while the file is read: PipelineConfig fills in the default.
_Location = Annotated[Path | str | None, BeforeValidator(_table_location)]


class OutputConfig(Section):
    """`output:` -- absolute Delta table paths (or s3a:// URIs) and the partition columns. The
    pipeline fills in the default paths (`completed`) and checks the columns (`checked_partitions`)."""

    path: _Location = None
    quarantine_path: _Location = None
    partition_by: Annotated[tuple[Any, ...], BeforeValidator(_partition_list)] = ("event_date",)

    def completed(self, name: str) -> OutputConfig:
        """The section with its default paths: tables/<name> in the state folder, <path>_quarantine."""
        path = self.path or local_path(f"tables/{name}")
        quarantine = self.quarantine_path or (
            f"{path}_quarantine" if isinstance(path, str) else Path(f"{path}_quarantine")
        )
        if quarantine == path:
            raise problem("it must differ from output.path", at=".quarantine_path", value=str(quarantine))
        return self.model_copy(update={"path": path, "quarantine_path": quarantine})

    def checked_partitions(self, columns: tuple[tuple[str, str], ...]) -> OutputConfig:
        """The section with its partition columns spelt as the value's `columns` spell them; a
        column the table lacks, cannot partition by, or lists twice is a problem."""
        allowed = {n.lower(): (n, base_type(t)) for n, t in columns}
        allowed.update({n: (n, "") for n in _BUILTIN_PARTITIONS})
        names = [n for n, _ in allowed.values()]
        chosen: list[str] = []
        for i, col in enumerate(self.partition_by):
            at = f".partition_by[{i}]"
            canonical, base = allowed.get(str(col).lower(), ("", ""))
            if not (isinstance(col, str) and canonical):
                raise problem(f"use one of {', '.join(names)}{hint(str(col), names)}", at=at, value=col)
            if base in _UNPARTITIONABLE:
                raise problem(f"a {base} column cannot partition a table", at=at, value=col)
            if canonical in chosen:
                raise problem("the column is listed twice; remove one", at=at, value=col)
            chosen.append(canonical)  # the schema's spelling, so the writer finds the column
        return self.model_copy(update={"partition_by": tuple(chosen)})

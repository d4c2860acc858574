"""The `output:` section: the table format (Delta, the default, or Iceberg), where batches land (a
local folder or an s3a:// URI for the table and its quarantine table; for Iceberg, the table's
namespace.name in its catalog, a JDBC catalog whose warehouse is output.path or a REST catalog
that places tables itself) and the partition columns, checked against the value's columns."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, model_validator

from eos_ingest import paths
from eos_ingest.config import partition_transforms
from eos_ingest.config.checks import ConnId, Section, choice, problem
from eos_ingest.config.table_location import TableLocation, TableUriError, object_store_uri
from eos_ingest.schema.ddl import base_type, hint

_UNPARTITIONABLE = ("ARRAY", "MAP", "STRUCT", "BINARY", "VARIANT")  # Spark refuses them as partitions
_BUILTIN_PARTITIONS = ("event_date", "kafka_topic", "kafka_partition")
FORMATS = ("delta", "iceberg")
CATALOG_TYPES = ("jdbc", "rest")
_JDBC_URI_FIX = (
    "use sqlite:///<file> or postgresql+psycopg://user@host/db, or leave it out for the pipeline's "
    "control DB (control_db_url)"
)
_REST_URI_FIX = "give the REST catalog's base URL, http(s)://host[:port][/path] (the path before /v1/)"
# An Iceberg table as the file names it: namespace.table, each a SQL identifier Spark, pyiceberg and
# the JDBC catalog's tables all take as it is (no quoting), lower case as Spark's catalog keeps it.
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,99}")
_TABLE_FIX = "give namespace.table, each of [a-z0-9_] starting with a letter or _, e.g. events.orders"


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


def _iceberg_table(value: Any) -> str | None:
    if value is None:
        return None
    parts = value.split(".") if isinstance(value, str) else []
    if len(parts) != 2 or not all(_IDENTIFIER.fullmatch(p) for p in parts):
        raise problem(_TABLE_FIX)
    return str(value)


def _catalog_uri(value: Any) -> str | None:
    """A JDBC catalog's SQLAlchemy URL or a REST catalog's http(s) URL (CatalogConfig checks which
    its type takes)."""
    if value is None or (isinstance(value, str) and re.match(r"https?://[^/\s]+", value)):
        return value.rstrip("/") if value is not None else None
    if not (isinstance(value, str) and re.match(r"(sqlite|postgresql)(\+\w+)?://", value)):
        raise problem(f"{_JDBC_URI_FIX}; for type rest, {_REST_URI_FIX}")
    if value.startswith("sqlite:///") and not value.startswith("sqlite:////"):
        return f"sqlite:///{paths.state_dir() / value.removeprefix('sqlite:///')}"  # as control_db_url
    return value


# None only while the file is read: PipelineConfig fills in the default.
_Location = Annotated[Path | str | None, BeforeValidator(_table_location)]
_TableName = Annotated[str | None, BeforeValidator(_iceberg_table)]


class CatalogConfig(Section):
    """`output.catalog:` -- the Iceberg catalog of an `output.format: iceberg` table. `jdbc` keeps
    it in a database: by default the pipeline's control DB (`uri: null`), so nothing new runs; its
    warehouse is `output.path`. `rest` is a REST catalog server at `uri` (Polaris, Nessie, Gravitino,
    Unity, a cloud's): it places the tables in its own warehouse (`warehouse` names one where the
    server serves several), and `conn_id` names the Airflow connection holding its credentials
    (connections/iceberg_rest.py)."""

    type: Annotated[str, choice(CATALOG_TYPES)] = "jdbc"
    uri: Annotated[str | None, BeforeValidator(_catalog_uri)] = None
    conn_id: ConnId = None
    warehouse: str | None = None

    @model_validator(mode="after")
    def _fits_type(self) -> CatalogConfig:
        if self.type == "jdbc":
            if self.uri is not None and self.uri.startswith(("http://", "https://")):
                raise problem(f"a jdbc catalog's uri is a database's: {_JDBC_URI_FIX}; or set "
                              "output.catalog.type: rest", at=".uri", value=self.uri)  # fmt: skip
            for key in ("conn_id", "warehouse"):
                if getattr(self, key) is not None:
                    fix = f"output.catalog.{key} is a REST catalog's: remove it, or set output.catalog.type: rest"
                    if key == "warehouse":
                        fix += " (a jdbc catalog's warehouse is output.path)"
                    raise problem(fix, at=f".{key}", value=getattr(self, key))
            return self
        if self.uri is None or not self.uri.startswith(("http://", "https://")):
            raise problem(f"a rest catalog needs its URL: {_REST_URI_FIX}", at=".uri", value=self.uri)
        if self.warehouse is not None and not self.warehouse.strip():
            raise problem(
                "name the server's warehouse, or leave the key out", at=".warehouse", value=self.warehouse
            )
        return self


class OutputConfig(Section):
    """`output:` -- the table format, absolute Delta table paths (or s3a:// URIs; for Iceberg,
    `path` is the catalog's warehouse and `table`/`quarantine_table` name the tables) and the
    partition columns. The pipeline fills in the defaults (`completed`) and checks the columns
    (`checked_partitions`)."""

    format: Annotated[str, choice(FORMATS)] = "delta"
    path: _Location = None
    quarantine_path: _Location = None
    table: _TableName = None
    quarantine_table: _TableName = None
    catalog: CatalogConfig = Field(default_factory=CatalogConfig)
    partition_by: Annotated[tuple[Any, ...], BeforeValidator(_partition_list)] = ("event_date",)

    def completed(self, name: str) -> OutputConfig:
        """The section with its defaults: tables/<name> in the state folder, <path>_quarantine (for
        Iceberg, <table>_quarantine); a key of the other format is a problem."""
        if self.format == "iceberg":
            return self._completed_iceberg(name)
        for key in ("table", "quarantine_table"):
            if getattr(self, key) is not None:
                fix = f"output.{key} names an Iceberg table: remove it, or set output.format: iceberg"
                raise problem(fix, at=f".{key}", value=getattr(self, key))
        if "catalog" in self.model_fields_set:
            fix = "output.catalog is an Iceberg table's: remove it, or set output.format: iceberg"
            raise problem(fix, at=".catalog", value=self.catalog.model_dump())
        path = self.path or local_path(f"tables/{name}")
        quarantine = self.quarantine_path or (
            f"{path}_quarantine" if isinstance(path, str) else Path(f"{path}_quarantine")
        )
        if quarantine == path:
            raise problem("it must differ from output.path", at=".quarantine_path", value=str(quarantine))
        return self.model_copy(update={"path": path, "quarantine_path": quarantine})

    def _completed_iceberg(self, name: str) -> OutputConfig:
        if self.table is None:
            raise problem(
                f"output.format iceberg writes a table of its catalog: name it, {_TABLE_FIX}",
                at=".table",
                value=None,
            )
        if self.quarantine_path is not None:
            fix = "an Iceberg pipeline names its quarantine table: use output.quarantine_table (namespace.table)"
            raise problem(fix, at=".quarantine_path", value=str(self.quarantine_path))
        quarantine = self.quarantine_table or f"{self.table}_quarantine"
        if quarantine == self.table:
            raise problem("it must differ from output.table", at=".quarantine_table", value=quarantine)
        if self.catalog.type == "rest" and "path" in self.model_fields_set:
            fix = ("a REST catalog places its tables in its own warehouse: remove output.path (name "
                   "one of the server's warehouses in output.catalog.warehouse if it serves several)")  # fmt: skip
            raise problem(fix, at=".path", value=str(self.path))
        # The warehouse of a jdbc catalog: its tables live under it (<path>/<namespace>/<table>).
        # A rest catalog's tables are the server's; the path stays filled in (unused by it).
        path = self.path or local_path(f"tables/{name}")
        return self.model_copy(update={"path": path, "quarantine_table": quarantine})

    def checked_partitions(self, columns: tuple[tuple[str, str], ...]) -> OutputConfig:
        """The section with its partition columns spelt as the value's `columns` spell them; a
        column the table lacks, cannot partition by, or lists twice is a problem."""
        allowed = {n.lower(): (n, base_type(t)) for n, t in columns}
        allowed.update({n: (n, "") for n in _BUILTIN_PARTITIONS})
        names = [n for n, _ in allowed.values()]
        chosen: list[str] = []
        for i, col in enumerate(self.partition_by):
            at = f".partition_by[{i}]"
            try:
                transform = partition_transforms.parse(col)
            except ValueError as exc:
                raise problem(str(exc), at=at, value=col) from None
            if transform is not None:
                chosen.append(self._checked_transform(transform, allowed, at, col, chosen))
                continue
            canonical, base = allowed.get(str(col).lower(), ("", ""))
            if not (isinstance(col, str) and canonical):
                raise problem(f"use one of {', '.join(names)}{hint(str(col), names)}", at=at, value=col)
            if base in _UNPARTITIONABLE:
                raise problem(f"a {base} column cannot partition a table", at=at, value=col)
            if canonical in chosen:
                raise problem("the column is listed twice; remove one", at=at, value=col)
            chosen.append(canonical)  # the schema's spelling, so the writer finds the column
        return self.model_copy(update={"partition_by": tuple(chosen)})

    def _checked_transform(
        self,
        transform: partition_transforms.Transform,
        allowed: dict[str, tuple[str, str]],
        at: str,
        col: Any,
        chosen: list[str],
    ) -> str:
        """The transform spelt canonically over the schema's spelling of its column."""
        if self.format != "iceberg":
            raise problem(
                "a partition transform is Iceberg's: partition a Delta table by a column, or set "
                "output.format: iceberg",
                at=at,
                value=col,
            )
        sources = {**allowed, **{n: (n, t) for n, t in partition_transforms.BUILTIN_SOURCES.items()}}
        canonical, base = sources.get(transform.column.lower(), ("", ""))
        if not canonical:
            names = [n for n, _ in sources.values()]
            raise problem(
                f"transform one of {', '.join(names)}{hint(transform.column, names)}", at=at, value=col
            )
        fix = partition_transforms.misfit(transform, base)
        if fix is not None:
            raise problem(fix, at=at, value=col)
        spelt = partition_transforms.Transform(transform.name, canonical, transform.width).spelt()
        if spelt in chosen:
            raise problem("the transform is listed twice; remove one", at=at, value=col)
        return spelt

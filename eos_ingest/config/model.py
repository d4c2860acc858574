"""PipelineConfig: one pipeline file, validated, every default filled in, is the config the
package runs on (frozen; `checks.replaced` makes a checked copy).

Each rule raises `problem(fix)`; pydantic collects the problems of every key, and
config/pipeline.py's load_pipeline turns them into one ConfigError naming the file, the key, the
value and the fix of each. The fields are the file's keys (pipelines/demo.yaml and docs/pipelines.md
describe them); a few are derived, marked DERIVED: a file may not give them.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

from eos_ingest import paths
from eos_ingest.config import expectation_types as gx_types
from eos_ingest.config.checks import (
    DERIVED,
    ConnId,
    RequiredConnId,
    Schedule,
    Section,
    choice,
    from_file,
    problem,
)
from eos_ingest.config.expectation_suites import checked_suite_file
from eos_ingest.config.kafka import START_FROM, KafkaSettings, KafkaTimeout, MaxRecords, Topics
from eos_ingest.config.optional_dags import AlertsConfig, MaintenanceConfig
from eos_ingest.config.output import CatalogConfig, OutputConfig
from eos_ingest.config.pipeline_name import BACKFILL_PREFIX, MAX_NAME, NAME
from eos_ingest.config.table_location import TableLocation, is_object_store
from eos_ingest.config.value import KeySection, MetadataConfig, RegistrySection, ValueConfig
from eos_ingest.redact import is_secret_key, redact_url

CONTROL_DB_ENV = "EOS_CONTROL_DB_URL"  # the control DB of pipelines whose file names none
_EXAMPLE = "{type: expect_column_values_to_not_be_null, column: id}"
# Checks that name an engine's types. The gate and the audit validate pandas frames (Arrow's
# conversion of the Spark rows and of the table), and value.schema already fixes every column's
# type, so such a check would compare unlike type names rather than the data.
_ENGINE_TYPED = ("expect_column_values_to_be_of_type", "expect_column_values_to_be_in_type_list")


def _name(value: Any, info: ValidationInfo) -> str:
    stem = info.context["stem"] if info.context else value
    if not (isinstance(value, str) and NAME.fullmatch(value) and value == stem):
        raise problem(f"set it to the file name {stem!r} ([a-z0-9_]+)")
    if len(value) > MAX_NAME:
        raise problem(
            f"use at most {MAX_NAME} characters, so that the DAG id {BACKFILL_PREFIX}<name> fits Airflow"
        )
    return value


def _db_url(url: Any) -> str:
    """The file's control_db_url; without one $EOS_CONTROL_DB_URL (a deployment's default, e.g.
    the PostgreSQL of docker-compose.yaml); without that the SQLite file in the state folder."""
    from_env = url is None and bool(os.environ.get(CONTROL_DB_ENV))
    if url is None and not from_env:
        return f"sqlite:///{paths.state_dir() / 'control.db'}"
    if from_env:
        url = os.environ[CONTROL_DB_ENV]
    if not (isinstance(url, str) and re.match(r"(sqlite|postgresql)(\+\w+)?://", url)):
        fix = "use sqlite:///<file> or postgresql+psycopg://user@host/db"
        if from_env:  # the file has no control_db_url: the value is the environment's
            raise problem(f"{fix} in ${CONTROL_DB_ENV}, or set control_db_url in the file", value=url)
        raise problem(fix)
    if url.startswith("sqlite:///") and not url.startswith(("sqlite:////", "sqlite:///:memory:")):
        # A relative SQLite path would follow the working directory of each Airflow process.
        return f"sqlite:///{paths.state_dir() / url.removeprefix('sqlite:///')}"
    return url


def _expectation_list(value: Any) -> Any:
    if not isinstance(value, list | tuple):
        raise problem("give a list of expectation configs, or []")
    return value


def _expectation(item: Any) -> dict[str, Any]:
    if not (isinstance(item, dict) and isinstance(item.get("type"), str)):
        raise problem(f'each item is a mapping with a "type", e.g. {_EXAMPLE}')
    if item["type"] in _ENGINE_TYPED:
        raise problem(
            "column types are fixed by value.schema (a row that does not fit goes to quarantine); "
            "remove this expectation, or check values instead (e.g. expect_column_values_to_match_regex)",
            at=".type",
            value=item["type"],
        )
    found = gx_types.check_expectation(item)
    if found:
        at, value, fix = found
        raise problem(fix, at=f".{at}", value=value)
    return dict(item)


class PipelineConfig(Section):
    """One validated pipeline: topics in, one Delta or Iceberg table (plus its quarantine table) out.
    Validate a file's values with context={"stem": <file stem>, "folder": <its folder>}."""

    name: Annotated[str, BeforeValidator(_name)] = Field(default=None, validate_default=True)
    topics: Topics = Field(default=None, validate_default=True)
    # librdkafka settings; the loader gives the default (kafka.DEFAULT_KAFKA) to a file without them.
    kafka: KafkaSettings = Field(default=None, validate_default=True)
    # Airflow connection whose settings join `kafka` (connections/kafka.py); None = none.
    kafka_conn_id: ConnId = "kafka_default"
    # Airflow connection of type aws whose access joins the AWS_* variables (connections/aws.py); None = none.
    aws_conn_id: ConnId = None
    # Airflow connection of type spark whose master the DAGs' spark-submit uses (SparkSubmitOperator's
    # conn_id): pipelines of one Airflow may run on different clusters. The CLI takes --master.
    spark_conn_id: RequiredConnId = "spark_default"
    start_from: Annotated[str, choice(START_FROM)] = "earliest"  # where a partition never seen starts
    max_records_per_partition: MaxRecords = 100_000
    # How long the Spark read waits for an unanswered broker before the batch fails as retriable.
    kafka_timeout_seconds: KafkaTimeout = 30.0
    # The job reads the key's settings as metadata.key_* (derived below).
    key: KeySection = Field(default_factory=dict, validate_default=True, exclude=True)
    value: ValueConfig = Field(default_factory=dict, validate_default=True)
    metadata: MetadataConfig = Field(default_factory=dict, validate_default=True)
    output: OutputConfig = Field(default_factory=dict, validate_default=True)
    control_db_url: Annotated[str, BeforeValidator(_db_url)] = Field(default=None, validate_default=True)
    schedule: Schedule = "@hourly"  # the ingest DAG's; None = manual runs only
    expectations: Annotated[
        tuple[Annotated[dict[str, Any], BeforeValidator(_expectation)], ...],
        BeforeValidator(_expectation_list),
    ] = ()
    # A suite of the deployment's expectations folder, by name, checked after the default suite and
    # `expectations:` (config/expectation_suites.py); the loader makes the name the checked file's path.
    expectations_suite: Path | None = None
    # None: no maintenance DAG (`eos-ingest maintain` still works, with its defaults).
    maintenance: MaintenanceConfig | None = None
    # None: no alerts DAG (`eos-ingest check-lag` still works, with limits given as options).
    alerts: AlertsConfig | None = None
    # Derived by the loader: the file (resolved), and whether it has no `kafka:` section: its settings
    # are then only the built-in default, which an Airflow connection replaces (connections/kafka.py).
    source: Annotated[Path, DERIVED] = Path()
    kafka_is_default: Annotated[bool, DERIVED] = False

    @field_validator("value")
    @classmethod
    def _value(cls, value: ValueConfig) -> ValueConfig:
        return value.derived()

    @field_validator("metadata")
    @classmethod
    def _key(cls, metadata: MetadataConfig, info: ValidationInfo) -> MetadataConfig:
        # Here, not in KeySection: the key's writers may come from the value's registry, and
        # `value` is validated after `key` (the fields' order).
        key, value = info.data.get("key"), info.data.get("value")
        if key is None:  # refused: that problem is reported
            return metadata
        if (
            value is not None
            and key.format == "avro"
            and not key.writer_schemas
            and value.schema_registry is None
        ):
            raise problem(
                "Avro keys need their writer schemas: give value.schema_registry.url (the key shares the "
                "value's registry; it needs value.format avro), or key.writer_schemas "
                "({<schema id>: <.avsc path>})",
                key="key.writer_schemas",
                value=None,
            )
        return metadata.with_key(key)

    @field_validator("output")
    @classmethod
    def _output(cls, output: OutputConfig, info: ValidationInfo) -> OutputConfig:
        output = output.completed(info.data.get("name") or (info.context or {}).get("stem", ""))
        value = info.data.get("value")
        return output if value is None else output.checked_partitions(value.columns)  # None: refused

    @field_validator("control_db_url")
    @classmethod
    def _coordinator(cls, url: str, info: ValidationInfo) -> str:
        output = info.data.get("output")
        tables = (output.path, output.quarantine_path) if output is not None else ()
        if url.startswith("sqlite") and any(is_object_store(t) for t in tables if t is not None):
            raise problem(
                "s3a tables commit through the control DB, which every writer must share (a "
                "cluster cannot share one SQLite file); use postgresql+psycopg://user@host/db",
                value=url,  # a SQLite URL holds no password
            )
        return url

    @field_validator("expectations_suite", mode="before")
    @classmethod
    def _expectations_suite(cls, value: Any, info: ValidationInfo) -> Path | None:
        if value is None or not from_file(info):  # a path from code (a checked copy) stays
            return value
        return checked_suite_file(value, Path(info.context["folder"]))  # type: ignore[index]

    @field_validator("alerts")
    @classmethod
    def _alerts(cls, alerts: AlertsConfig | None) -> AlertsConfig | None:
        return alerts.named_limit() if alerts is not None else None

    @property
    def output_path(self) -> TableLocation:
        """Absolute path (or s3a:// URI) of the output Delta table."""
        assert self.output.path is not None  # filled in by _output
        return self.output.path

    @property
    def quarantine_path(self) -> TableLocation:
        """Absolute path (or s3a:// URI) of the quarantine Delta table (a Delta pipeline's only)."""
        assert self.output.quarantine_path is not None  # filled in by _output for Delta
        return self.output.quarantine_path

    @property
    def output_tables(self) -> tuple[str, str]:
        """Where the table format finds the table and its quarantine table: Delta's paths, or
        Iceberg's namespace.table names in the pipeline's catalog."""
        if self.output.format == "iceberg":
            assert self.output.table is not None and self.output.quarantine_table is not None
            return self.output.table, self.output.quarantine_table
        return str(self.output_path), str(self.quarantine_path)

    @property
    def iceberg_catalog_uri(self) -> str:
        """The SQLAlchemy URL of the database holding the Iceberg JDBC catalog: output.catalog.uri,
        by default the control DB (a REST catalog's: its http(s) URL, output.catalog.uri)."""
        return self.output.catalog.uri or self.control_db_url

    @property
    def kafka_settings(self) -> dict[str, str]:
        """A copy of the file's librdkafka settings (callers may add to it)."""
        return dict(self.kafka)

    @property
    def payload_columns(self) -> list[tuple[str, str]]:
        """``(name, type)`` of every column of the value schema; empty for raw values."""
        return list(self.value.columns)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able view for logs and the UI, with secrets masked as ``***``."""
        shown: dict[str, Any] = json.loads(json.dumps(self.model_dump(), default=str))
        shown["kafka"] = {k: "***" if is_secret_key(k) else v for k, v in self.kafka.items()}
        shown["control_db_url"] = redact_url(self.control_db_url)
        registry = shown["value"].get("registry")
        if registry:
            registry["password"] = "***" if registry.get("password") else None
            registry["files"] = sorted(registry.get("files") or {})  # the ids; the texts are long
        shown["metadata"]["key_writer_schemas"] = sorted(shown["metadata"].get("key_writer_schemas") or {})
        return shown

    @classmethod
    def known_keys(cls, section: tuple[str | int, ...]) -> list[str]:
        """The keys a section (() for the file, ("value",), ("output",)) may hold."""
        models: dict[tuple[str | int, ...], type[Section]] = {
            (): cls,
            ("value",): ValueConfig,
            ("output",): OutputConfig,
            ("output", "catalog"): CatalogConfig,
            ("value", "schema_registry"): RegistrySection,
            ("key",): KeySection,
            ("metadata",): MetadataConfig,
            ("maintenance",): MaintenanceConfig,
            ("alerts",): AlertsConfig,
        }
        model = models.get(section)
        return model.file_keys() if model else []

"""The expectation suite of a pipeline (default suite + its own expectations) and how failures read.

Great Expectations is imported lazily: the import takes seconds and logs hundreds of INFO lines,
and the CLI and the DAG parser import eos_ingest without needing it.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eos_ingest import paths
from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.errors import ConfigError
from eos_ingest.quality.gx_import import import_gx, quiet_gx
from eos_ingest.schema.columns import IDENTITY_COLUMNS

if TYPE_CHECKING:
    from great_expectations import ExpectationSuite
    from great_expectations.core import ExpectationSuiteValidationResult, ExpectationValidationResult
    from great_expectations.expectations import Expectation

DEFAULT_SUITE = paths.DEFAULT_SUITE  # expectations/suites/eos_default.json (shipped in the wheel)
# Computed before validation: null when the row's offset is inside the batch's planned ranges,
# else a text naming topic, partition, offset and the planned ranges, which GX shows as the
# unexpected value, so a failure names the offending partition.
RANGE_COLUMN = "eos_outside_planned_ranges"
# $PARAMETER of the default suite's row count: read_committed records - quarantined rows.
EXPECTED_ROWS = "eos_expected_output_rows"
# Keys of a pipeline's expectation mapping that are fields of the expectation, not arguments
# of the check; everything else (column, min_value, row_condition, ...) is passed through.
_NOT_ARGUMENTS = ("type",)
_EXAMPLES = 3


@cache
def default_suite_doc(path: Path | None = None) -> dict[str, Any]:
    """The default suite (GX suite JSON): expectations/suites/eos_default.json as this installation
    has it (paths.shipped_text), or the file at `path`."""
    text = path.read_text(encoding="utf-8") if path else paths.shipped_text(paths.DEFAULT_SUITE)
    doc: dict[str, Any] = json.loads(text)
    return doc


def pipeline_expectations(config: PipelineConfig) -> list[Expectation]:
    """The pipeline's own expectations (`config.expectations`) as GX expectation objects.

    Each item is a mapping with a GX 1.x snake-case "type" plus the expectation's fields, e.g.
    {"type": "expect_column_values_to_be_between", "column": "amount", "min_value": 0,
    "severity": "warning"}. An unknown type or bad arguments raise ConfigError naming the
    pipeline, the index and the type. Call it early (DAG parse, plan) to fail before any Spark work.
    """
    import_gx()
    with quiet_gx():
        from great_expectations.exceptions import ExpectationNotFoundError  # noqa: PLC0415 GX after gx_import.import_gx
        from great_expectations.expectations.registry import (  # noqa: PLC0415 GX after gx_import.import_gx
            get_expectation_impl,
            list_registered_expectation_implementations,
        )

    built: list[Expectation] = []
    for i, item in enumerate(config.expectations):
        kind = str(item.get("type"))
        where = f"pipeline {config.name!r}: expectations[{i}] (type {kind!r})"
        try:
            impl = get_expectation_impl(kind)
        except ExpectationNotFoundError:
            known = list_registered_expectation_implementations()
            close = difflib.get_close_matches(kind, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                f"{where} is not a Great Expectations expectation type; {hint}use a GX 1.x type in "
                "snake case, e.g. expect_column_values_to_not_be_null"
            ) from None
        arguments = {k: v for k, v in item.items() if k not in _NOT_ARGUMENTS}
        try:
            built.append(impl(**arguments))
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
            raise ConfigError(f"{where} has invalid arguments {arguments}: {exc}") from None
    return built


def build_suite(config: PipelineConfig) -> ExpectationSuite:
    """The suite a pipeline's batches are validated with: the default suite, then its own
    `expectations:`, then those of the suite it names (`expectations_suite:`)."""
    import_gx()
    with quiet_gx():
        import great_expectations as gx  # noqa: PLC0415 GX after gx_import.import_gx
        from great_expectations.expectations.expectation_configuration import ExpectationConfiguration  # noqa: PLC0415 GX after gx_import.import_gx

    doc = default_suite_doc()
    expectations = [ExpectationConfiguration(**e).to_domain_obj() for e in doc["expectations"]]
    expectations += pipeline_expectations(config)
    if config.expectations_suite is not None:  # the deployment's suite the pipeline names
        # Read each time, not cached: a long-lived process sees the file as edited (checked at load).
        named = json.loads(config.expectations_suite.read_text(encoding="utf-8"))
        expectations += [ExpectationConfiguration(**e).to_domain_obj() for e in named["expectations"]]
    suite = gx.ExpectationSuite(
        name=config.name,
        expectations=expectations,
        meta={**doc.get("meta", {}), "eos_default_suite": doc["name"], "eos_pipeline": config.name},
    )
    # ExpectationSuite logs and drops an expectation it cannot take: never validate with fewer.
    if len(suite.expectations) != len(expectations):
        raise ConfigError(f"pipeline {config.name!r}: GX dropped expectations of its suite; see the log")
    return suite


# Arguments of an expectation that name the columns it reads.
_COLUMN_ARGUMENTS = ("column", "column_A", "column_B", "column_list")


def validated_columns(config: PipelineConfig, columns: Sequence[str]) -> list[str]:
    """The columns of the output frame the suite reads (named_columns), else every column."""
    named = named_columns(config, columns)
    return list(columns) if named is None else named


def named_columns(config: PipelineConfig, columns: Sequence[str]) -> list[str] | None:
    """The columns of the output frame the suite reads, in the frame's order; None when it may
    read any. The frame to validate is narrowed to them: the gate collects just those as Arrow,
    the audit reads just those from the table.

    The default suite reads the identity; a pipeline's own column expectations add the columns
    they name. Anything whose columns cannot be told from its arguments (a table expectation, a
    row_condition, a column the frame lacks, so GX reports it) needs every column.
    """
    if config.expectations_suite is not None:  # a suite file's checks: any column
        return None
    wanted = list(IDENTITY_COLUMNS)
    for item in config.expectations:
        kind = str(item.get("type", ""))
        if kind.startswith("expect_table_") or item.get("row_condition") is not None:
            return None
        named = [item[k] for k in _COLUMN_ARGUMENTS if k in item]
        if not named:
            return None
        for value in named:
            for column in value if isinstance(value, list) else [value]:
                if column not in columns:
                    return None
                if column not in wanted:
                    wanted.append(column)
    return [c for c in columns if c in wanted]


def expectation_name(result: ExpectationValidationResult) -> str:
    """`type(columns)` of a result's expectation, e.g. expect_column_values_to_not_be_null(kafka_offset)."""
    config = result.expectation_config
    assert config is not None  # a validation result always carries its expectation
    kwargs = config.kwargs
    if "column_list" in kwargs:
        columns = ", ".join(str(c) for c in kwargs["column_list"])
    elif "column_A" in kwargs:
        columns = f"{kwargs['column_A']}, {kwargs['column_B']}"
    else:
        columns = str(kwargs.get("column", ""))
    return f"{config.type}({columns})" if columns else str(config.type)


def observed(result: ExpectationValidationResult) -> str:
    """A short observed value: the exception, the observed value, or unexpected counts and examples."""
    info = result.exception_info or {}
    if info.get("raised_exception"):
        return f"raised: {str(info.get('exception_message'))[:200]}"
    details: Mapping[str, Any] = result.result or {}
    config = result.expectation_config
    if "observed_value" in details:
        text = f"observed {_short(details['observed_value'])}"
        if config is not None and "value" in config.kwargs:
            text += f", expected {config.kwargs['value']}"
        return text
    if "unexpected_count" in details:
        text = f"{details['unexpected_count']} of {details.get('element_count')} rows unexpected"
        examples = [_short(v) for v in (details.get("partial_unexpected_list") or [])[:_EXAMPLES]]
        return f"{text}, e.g. {'; '.join(examples)}" if examples else text
    return _short(details)


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summarize(result: ExpectationSuiteValidationResult) -> dict[str, Any]:
    """Statistics and the failed expectations of a suite result, split by severity."""
    failed = [r for r in result.results if not r.success]

    def critical(r: ExpectationValidationResult) -> bool:
        config = r.expectation_config
        return config is None or str(getattr(config.severity, "value", config.severity)) == "critical"

    stats = result.statistics
    return {
        "statistics": {
            "evaluated_expectations": int(stats["evaluated_expectations"]),
            "successful_expectations": int(stats["successful_expectations"]),
            "unsuccessful_expectations": int(stats["unsuccessful_expectations"]),
        },
        "failed_expectations": [expectation_name(r) for r in failed],
        "critical_failures": [f"{expectation_name(r)}: {observed(r)}" for r in failed if critical(r)],
        "warnings": [f"{expectation_name(r)}: {observed(r)}" for r in failed if not critical(r)],
    }

"""The fields of Great Expectations' expectation types, for checking `expectations:` at load time.

Importing GX takes seconds (over ten on a busy host) and logs hundreds of lines; the DAG parser
loads every pipeline file, so the config checks names against this table instead. Generated from
the installed GX; tests/unit/config/test_pipeline.py fails when it no longer matches. Regenerate with
``.venv/bin/python -m eos_ingest.config.expectation_types``. quality/suite.py still builds each expectation with GX
itself, which checks the values.
"""

from __future__ import annotations

import difflib
import logging
import sys
from pathlib import Path
from typing import Any

# fmt: off
# -- generated: begin
GX_VERSION = "1.24.1"
SEVERITIES = ("critical", "info", "warning")
COMMON_FIELDS = ("catch_exceptions", "description", "id", "meta", "notes", "rendered_content", "result_format", "severity", "windows")
# type -> (required fields, other fields), names separated by spaces
TYPES: dict[str, tuple[str, str]] = {
    "expect_column_distinct_values_to_be_in_set": ("column value_set", "batch_id condition_parser row_condition"),
    "expect_column_distinct_values_to_contain_set": ("column value_set", "batch_id condition_parser row_condition"),
    "expect_column_distinct_values_to_equal_set": ("column value_set", "batch_id condition_parser row_condition"),
    "expect_column_kl_divergence_to_be_less_than": ("column", "batch_id bucketize_data condition_parser internal_weight_holdout max_value min_value partition_object row_condition tail_weight_holdout threshold"),
    "expect_column_max_to_be_between": ("column", "batch_id condition_parser max_value min_value row_condition strict_max strict_min"),
    "expect_column_mean_to_be_between": ("column", "batch_id condition_parser max_value min_value row_condition strict_max strict_min"),
    "expect_column_median_to_be_between": ("column", "batch_id condition_parser max_value min_value row_condition strict_max strict_min"),
    "expect_column_min_to_be_between": ("column", "batch_id condition_parser max_value min_value row_condition strict_max strict_min"),
    "expect_column_most_common_value_to_be_in_set": ("column value_set", "batch_id condition_parser row_condition ties_okay"),
    "expect_column_pair_values_a_to_be_greater_than_b": ("column_A column_B", "batch_id condition_parser ignore_row_if mostly or_equal row_condition"),
    "expect_column_pair_values_to_be_equal": ("column_A column_B", "batch_id condition_parser ignore_row_if mostly row_condition"),
    "expect_column_pair_values_to_be_in_set": ("column_A column_B value_pairs_set", "batch_id condition_parser ignore_row_if mostly row_condition"),
    "expect_column_proportion_of_non_null_values_to_be_between": ("column", "batch_id condition_parser library_metadata max_value min_value row_condition strict_max strict_min"),
    "expect_column_proportion_of_unique_values_to_be_between": ("column", "batch_id condition_parser library_metadata max_value min_value row_condition strict_max strict_min"),
    "expect_column_quantile_values_to_be_between": ("column quantile_ranges", "allow_relative_error batch_id condition_parser row_condition"),
    "expect_column_stdev_to_be_between": ("column", "batch_id condition_parser max_value min_value row_condition strict_max strict_min"),
    "expect_column_sum_to_be_between": ("column", "batch_id condition_parser max_value min_value row_condition strict_max strict_min"),
    "expect_column_to_exist": ("column", "batch_id column_index"),
    "expect_column_type_to_be": ("column type_", "batch_id"),
    "expect_column_unique_value_count_to_be_between": ("column", "batch_id condition_parser library_metadata max_value min_value row_condition strict_max strict_min"),
    "expect_column_value_lengths_to_be_between": ("column", "batch_id condition_parser max_value min_value mostly row_condition strict_max strict_min"),
    "expect_column_value_lengths_to_equal": ("column value", "batch_id condition_parser mostly row_condition"),
    "expect_column_value_z_scores_to_be_less_than": ("column double_sided threshold", "batch_id condition_parser mostly row_condition"),
    "expect_column_values_to_be_between": ("column", "batch_id condition_parser max_value min_value mostly row_condition strict_max strict_min"),
    "expect_column_values_to_be_dateutil_parseable": ("column", "batch_id condition_parser library_metadata mostly row_condition"),
    "expect_column_values_to_be_decreasing": ("column", "batch_id condition_parser library_metadata mostly row_condition strictly"),
    "expect_column_values_to_be_in_set": ("column value_set", "batch_id condition_parser mostly row_condition"),
    "expect_column_values_to_be_in_type_list": ("column", "batch_id condition_parser mostly row_condition type_list"),
    "expect_column_values_to_be_increasing": ("column", "batch_id condition_parser library_metadata mostly row_condition strictly"),
    "expect_column_values_to_be_json_parseable": ("column", "batch_id condition_parser library_metadata mostly row_condition"),
    "expect_column_values_to_be_null": ("column", "batch_id condition_parser mostly row_condition"),
    "expect_column_values_to_be_of_type": ("column type_", "batch_id condition_parser mostly row_condition"),
    "expect_column_values_to_be_unique": ("column", "batch_id condition_parser mostly row_condition"),
    "expect_column_values_to_match_json_schema": ("column json_schema", "batch_id condition_parser library_metadata mostly row_condition"),
    "expect_column_values_to_match_like_pattern": ("column like_pattern", "batch_id condition_parser escape mostly row_condition"),
    "expect_column_values_to_match_like_pattern_list": ("column like_pattern_list", "batch_id condition_parser escape match_on mostly row_condition"),
    "expect_column_values_to_match_regex": ("column", "batch_id condition_parser mostly regex row_condition"),
    "expect_column_values_to_match_regex_list": ("column regex_list", "batch_id condition_parser match_on mostly row_condition"),
    "expect_column_values_to_match_strftime_format": ("column strftime_format", "batch_id condition_parser mostly row_condition"),
    "expect_column_values_to_not_be_in_set": ("column value_set", "batch_id condition_parser mostly row_condition"),
    "expect_column_values_to_not_be_null": ("column", "batch_id condition_parser mostly row_condition"),
    "expect_column_values_to_not_be_outliers": ("column", "batch_id condition_parser method mostly multiplier row_condition"),
    "expect_column_values_to_not_match_like_pattern": ("column like_pattern", "batch_id condition_parser escape mostly row_condition"),
    "expect_column_values_to_not_match_like_pattern_list": ("column like_pattern_list", "batch_id condition_parser escape mostly row_condition"),
    "expect_column_values_to_not_match_regex": ("column regex", "batch_id condition_parser mostly row_condition"),
    "expect_column_values_to_not_match_regex_list": ("column regex_list", "batch_id condition_parser mostly row_condition"),
    "expect_compound_columns_to_be_unique": ("column_list", "batch_id condition_parser ignore_row_if mostly row_condition"),
    "expect_multicolumn_sum_to_equal": ("column_list sum_total", "batch_id condition_parser ignore_row_if mostly row_condition"),
    "expect_multicolumn_values_to_be_equal": ("column_list", "batch_id condition_parser ignore_row_if mostly row_condition"),
    "expect_query_results_to_match_comparison": ("base_query comparison_data_source_name comparison_query", "batch_id mostly"),
    "expect_select_column_values_to_be_unique_within_record": ("column_list", "batch_id condition_parser ignore_row_if mostly row_condition"),
    "expect_table_column_count_to_be_between": ("", "batch_id max_value min_value"),
    "expect_table_column_count_to_equal": ("value", "batch_id"),
    "expect_table_columns_to_match_ordered_list": ("", "batch_id column_list"),
    "expect_table_columns_to_match_set": ("", "batch_id column_set exact_match"),
    "expect_table_row_count_to_be_between": ("", "batch_id condition_parser max_value min_value row_condition strict_max strict_min"),
    "expect_table_row_count_to_equal": ("value", "batch_id condition_parser row_condition"),
    "expect_table_row_count_to_equal_other_table": ("other_table_name", "batch_id condition_parser row_condition"),
    "unexpected_rows_expectation": ("unexpected_rows_query", "batch_id"),
}
# -- generated: end
# fmt: on


def check_expectation(item: dict[str, Any]) -> tuple[str, Any, str] | None:
    """The first problem of one `expectations:` item as (field, value, fix), or None.

    Checks the type, the field names and the severity; GX checks the values when the suite is built.
    """
    kind = item.get("type")
    if kind not in TYPES:
        close = difflib.get_close_matches(str(kind), list(TYPES), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return (
            "type",
            kind,
            (
                f"not a Great Expectations {GX_VERSION} expectation type{hint}; use a GX 1.x type in snake "
                "case, e.g. expect_column_values_to_not_be_null"
            ),
        )
    required, other = (names.split() for names in TYPES[kind])
    fields = [*required, *other]
    for key, value in item.items():
        if key != "type" and key not in fields and key not in COMMON_FIELDS:
            close = difflib.get_close_matches(str(key), [*fields, *COMMON_FIELDS], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            known = ", ".join([*fields, "severity", "meta", "notes", "..."])
            return str(key), value, f"{kind} has no such field{hint}; its fields: {known}"
    for key in required:
        if key not in item:
            return key, None, f"{kind} needs {', '.join(required)}; add {key}"
    severity = item.get("severity", "critical")
    if severity not in SEVERITIES:
        return "severity", severity, f"use {' or '.join(SEVERITIES)}"
    return None


def from_installed_gx() -> str:
    """The generated block of this module, computed from the installed GX."""
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    # GX only where the block is regenerated: the pipeline file's checks run at DAG parsing.
    import great_expectations as gx  # noqa: PLC0415 out of DAG parsing
    from great_expectations.expectations.expectation import Expectation  # noqa: PLC0415 out of DAG parsing
    from great_expectations.expectations.metadata_types import FailureSeverity  # noqa: PLC0415 out of DAG parsing
    from great_expectations.expectations.registry import (  # noqa: PLC0415 out of DAG parsing
        get_expectation_impl,
        list_registered_expectation_implementations,
    )

    common = sorted(Expectation.__fields__)
    lines = [
        f'GX_VERSION = "{gx.__version__}"',
        f"SEVERITIES = {_tuple(sorted(s.value for s in FailureSeverity))}",
        f"COMMON_FIELDS = {_tuple(common)}",
        "# type -> (required fields, other fields), names separated by spaces",
        "TYPES: dict[str, tuple[str, str]] = {",
    ]
    for name in sorted(list_registered_expectation_implementations()):
        fields = get_expectation_impl(name).__fields__
        required = " ".join(sorted(k for k, f in fields.items() if f.required))
        other = " ".join(sorted(k for k, f in fields.items() if not f.required and k not in common))
        lines.append(f'    "{name}": ("{required}", "{other}"),')
    return "\n".join([*lines, "}"])


def _tuple(names: list[str]) -> str:
    return "(" + ", ".join(f'"{n}"' for n in names) + ")"


def _write() -> None:
    path = Path(__file__)
    text = path.read_text(encoding="utf-8")
    head, rest = text.split("# -- generated: begin\n", 1)
    _, tail = rest.split("# -- generated: end\n", 1)
    path.write_text(f"{head}# -- generated: begin\n{from_installed_gx()}\n# -- generated: end\n{tail}")


if __name__ == "__main__":
    _write()
    sys.exit(0)

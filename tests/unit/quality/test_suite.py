"""The pipeline's suite: the default checks from the repo, its own expectations, clear config errors,
and failure text that names the expectation. No Spark, no broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from eos_ingest import paths
from eos_ingest.errors import ConfigError
from eos_ingest.quality.gx_import import quiet_gx
from eos_ingest.quality.rows import with_range_column_pandas
from eos_ingest.quality.suite import (
    EXPECTED_ROWS,
    RANGE_COLUMN,
    build_suite,
    default_suite_doc,
    pipeline_expectations,
    summarize,
    validated_columns,
)
from tests.helpers.gx import expecting, unchecked

with quiet_gx():
    from great_expectations.core import ExpectationSuiteValidationResult, ExpectationValidationResult
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration
    from great_expectations.expectations.registry import get_expectation_impl


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_the_default_suite_in_the_repo_holds_the_four_checks_as_known_gx_types() -> None:
    doc = default_suite_doc()
    kinds = [(e["type"], e["kwargs"]) for e in doc["expectations"]]

    for kind, _ in kinds:
        get_expectation_impl(kind)  # raises for an unknown type
    identity = ["kafka_topic", "kafka_partition", "kafka_offset"]
    assert ("expect_compound_columns_to_be_unique", {"column_list": identity}) in kinds
    for column in identity:
        assert ("expect_column_values_to_not_be_null", {"column": column}) in kinds
    assert ("expect_column_values_to_be_null", {"column": RANGE_COLUMN}) in kinds
    assert ("expect_table_row_count_to_equal", {"value": {"$PARAMETER": EXPECTED_ROWS}}) in kinds
    assert all(e["severity"] == "critical" for e in doc["expectations"])


def test_the_gx_project_config_keeps_generated_files_out_of_the_repo() -> None:
    config = yaml.safe_load((paths.GX_TEMPLATE).read_text())
    directories = [s["store_backend"]["base_directory"] for s in config["stores"].values()]
    directories += [s["store_backend"]["base_directory"] for s in config["data_docs_sites"].values()]

    # Relative, so under the context root <state folder>/gx where quality/context.py opens it.
    assert all(not Path(d).is_absolute() and ".." not in d for d in directories)
    assert config["analytics_enabled"] is False
    assert set(config["fluent_datasources"]["eos_spark"]["assets"]) == {"batch_rows"}


def test_a_pipeline_suite_is_the_default_suite_then_its_own_expectations(tmp_path: Path) -> None:
    own = {"type": "expect_column_values_to_be_between", "column": "amount", "min_value": 0,
           "severity": "warning"}  # fmt: skip
    suite = build_suite(expecting(tmp_path, [own]))

    assert suite.name == "orders"
    assert len(suite.expectations) == len(default_suite_doc()["expectations"]) + 1
    last = suite.expectations[-1]
    assert last.expectation_type == "expect_column_values_to_be_between"
    assert str(getattr(last.severity, "value", last.severity)) == "warning"


def test_an_unknown_expectation_type_names_the_pipeline_the_index_and_the_type(tmp_path: Path) -> None:
    config = unchecked(
        tmp_path,
        [
            {"type": "expect_column_values_to_not_be_null", "column": "id"},
            {"type": "expect_column_values_to_not_be_nul", "column": "id"},
        ],
    )

    with pytest.raises(ConfigError) as error:
        pipeline_expectations(config)

    message = str(error.value)
    assert "pipeline 'orders'" in message and "expectations[1]" in message
    assert "'expect_column_values_to_not_be_nul'" in message
    assert "did you mean 'expect_column_values_to_not_be_null'" in message


def test_bad_expectation_arguments_name_the_pipeline_and_the_index(tmp_path: Path) -> None:
    config = unchecked(tmp_path, [{"type": "expect_column_values_to_be_between", "min_value": 0}])

    with pytest.raises(ConfigError, match=r"pipeline 'orders': expectations\[0\].*invalid arguments"):
        pipeline_expectations(config)


def result(success: bool, kind: str, kwargs: dict[str, Any], details: dict[str, Any], severity: str):
    config = ExpectationConfiguration(type=kind, kwargs=kwargs, severity=severity)
    return ExpectationValidationResult(success=success, expectation_config=config, result=details)


def test_summarize_names_failed_expectations_with_columns_and_a_short_observed_value() -> None:
    results = [
        result(True, "expect_column_values_to_not_be_null", {"column": "kafka_offset"}, {}, "critical"),
        result(
            False,
            "expect_compound_columns_to_be_unique",
            {"column_list": ["kafka_topic", "kafka_partition", "kafka_offset"]},
            {"unexpected_count": 2, "element_count": 9, "partial_unexpected_list": [{"kafka_offset": 3}] * 2},
            "critical",
        ),
        result(False, "expect_table_row_count_to_equal", {"value": 10}, {"observed_value": 9}, "critical"),
        result(False, "expect_column_max_to_be_between", {"column": "amount"}, {"observed_value": 7}, "info"),
    ]
    stats = {"evaluated_expectations": 4, "successful_expectations": 1, "unsuccessful_expectations": 3}
    suite_result = ExpectationSuiteValidationResult(
        success=False, results=results, suite_name="orders", statistics=stats
    )

    summary = summarize(suite_result)

    assert summary["failed_expectations"] == [
        "expect_compound_columns_to_be_unique(kafka_topic, kafka_partition, kafka_offset)",
        "expect_table_row_count_to_equal",
        "expect_column_max_to_be_between(amount)",
    ]
    assert summary["critical_failures"] == [
        "expect_compound_columns_to_be_unique(kafka_topic, kafka_partition, kafka_offset): 2 of 9 rows"
        ' unexpected, e.g. {"kafka_offset": 3}; {"kafka_offset": 3}',
        "expect_table_row_count_to_equal: observed 9, expected 10",
    ]
    assert summary["warnings"] == ["expect_column_max_to_be_between(amount): observed 7"]
    assert summary["statistics"] == stats


FRAME = ["kafka_topic", "kafka_partition", "kafka_offset", "kafka_key", "batch_id", "id", "amount", "name"]
IDENTITY = ["kafka_topic", "kafka_partition", "kafka_offset"]


@pytest.mark.parametrize(
    ("expectations", "columns"),
    [
        pytest.param([], IDENTITY, id="default suite: the identity only"),
        pytest.param(
            [{"type": "expect_column_values_to_be_between", "column": "amount", "min_value": 0}],
            [*IDENTITY, "amount"],
            id="a column expectation adds its column",
        ),
        pytest.param(
            [{"type": "expect_compound_columns_to_be_unique", "column_list": ["id", "name"]}],
            [*IDENTITY, "id", "name"],
            id="a column list adds each column",
        ),
        pytest.param(
            [{"type": "expect_column_pair_values_a_to_be_greater_than_b", "column_A": "id", "column_B": "amount"}],
            [*IDENTITY, "id", "amount"],
            id="a column pair adds both",
        ),
        pytest.param(
            [{"type": "expect_column_values_to_not_be_null", "column": "id",
              "row_condition": 'name=="x"', "condition_parser": "spark"}],
            FRAME,
            id="a row_condition may read any column: keep all",
        ),
        pytest.param(
            [{"type": "expect_table_columns_to_match_set", "column_set": ["id"]}],
            FRAME,
            id="a table expectation sees every column: keep all",
        ),
        pytest.param(
            [{"type": "expect_column_values_to_not_be_null", "column": "missing"}],
            FRAME,
            id="a column the frame lacks: keep all, GX reports it",
        ),
    ],
)  # fmt: skip
def test_the_validated_frame_keeps_every_column_the_suite_reads(
    tmp_path: Path, expectations: list[dict[str, Any]], columns: list[str]
) -> None:
    assert validated_columns(expecting(tmp_path, expectations), FRAME) == [c for c in FRAME if c in columns]


def test_the_pandas_range_column_names_rows_outside_the_planned_ranges_as_spark_does() -> None:
    import pandas as pd

    from eos_ingest.plan.ranges import PlannedRange

    ranges = [PlannedRange("t", 0, 10, 20), PlannedRange("t", 0, 20, 30), PlannedRange("t", 1, 5, 6)]
    frame = pd.DataFrame(
        {
            "kafka_topic": ["t", "t", "t", "t", "t", None, "u"],
            "kafka_partition": pd.array([0, 0, 0, 1, 2, 0, 0], dtype="Int32"),
            "kafka_offset": pd.array([10, 29, 30, 5, 7, 12, 10], dtype="Int64"),
        }
    )

    column = with_range_column_pandas(frame, ranges)[RANGE_COLUMN].tolist()

    assert column == [
        None,
        None,
        "t[0] offset 30 outside planned [10, 30)",  # adjacent ranges read as one
        None,
        "t[2] offset 7 outside planned none",
        None,  # a null identity: the not-null expectations report it
        "u[0] offset 10 outside planned none",
    ]

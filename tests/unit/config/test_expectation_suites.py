"""`expectations_suite:` names a GX suite of the deployment's expectations folder; the default suite
ships in the package (a checkout: the top-level expectations/ folder). A missing or broken suite
file refuses the pipeline when it loads, so `eos-ingest plan` stops before any batch is planned,
with one line that names the file and the fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from eos_ingest import cli, paths
from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.errors import ConfigError
from eos_ingest.quality import suite as gx_suite

SUITE = {
    "name": "orders",
    "meta": {"notes": "a deployment's own suite"},
    "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "amount", "min_value": 0}},
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "name"}, "severity": "warning"},
    ],
}


@pytest.fixture
def deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A deployment's folders: pipelines/ and expectations/suites/ side by side."""
    monkeypatch.delenv("EOS_EXPECTATIONS_DIR", raising=False)
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "expectations" / "suites").mkdir(parents=True)
    return tmp_path


def pipeline(root: Path, suite: str | None = "orders") -> Path:
    doc = {
        "name": "orders",
        "topics": ["orders"],
        "value": {"format": "json", "schema": "id BIGINT, name STRING, amount DOUBLE"},
        "schedule": None,
        **({"expectations_suite": suite} if suite else {}),
    }
    file = root / "pipelines" / "orders.yaml"
    file.write_text(yaml.safe_dump(doc))
    return file


def test_a_named_suite_of_the_expectations_folder_follows_the_default_suite(deployment: Path) -> None:
    suite_file = deployment / "expectations" / "suites" / "orders.json"
    suite_file.write_text(json.dumps(SUITE))
    config = load_pipeline(pipeline(deployment))
    assert config.expectations_suite == suite_file.resolve()
    built = gx_suite.build_suite(config)
    default = gx_suite.default_suite_doc()["expectations"]
    assert [e.expectation_type for e in built.expectations][len(default) :] == [
        "expect_column_values_to_be_between",
        "expect_column_values_to_not_be_null",
    ]
    assert gx_suite.named_columns(config, ["kafka_topic", "amount"]) is None  # the suite may read any


def test_the_expectations_folder_is_the_env_else_beside_the_pipelines(
    deployment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = deployment / "elsewhere" / "suites"
    elsewhere.mkdir(parents=True)
    (elsewhere / "orders.json").write_text(json.dumps(SUITE))
    monkeypatch.setenv("EOS_EXPECTATIONS_DIR", str(elsewhere.parent))
    assert load_pipeline(pipeline(deployment)).expectations_suite == (elsewhere / "orders.json").resolve()


@pytest.mark.parametrize(
    ("case", "content", "fix"),
    [
        ("missing", None, "write it there (GX suite JSON"),
        ("not JSON", "{'name': 'orders'", "does not parse as JSON"),
        ("not a suite", json.dumps({"name": "orders"}), 'an "expectations" list'),
        ("another name", json.dumps({**SUITE, "name": "order"}), "set it to 'orders', the file name"),
        (
            "unknown type",
            json.dumps({**SUITE, "expectations": [{"type": "expect_column_to_be_lovely", "kwargs": {}}]}),
            "expectations[0].type = 'expect_column_to_be_lovely': not a Great Expectations",
        ),
    ],
)
def test_plan_refuses_a_suite_that_is_missing_or_does_not_parse_naming_the_file_and_the_fix(
    deployment: Path, capsys: pytest.CaptureFixture[str], case: str, content: str | None, fix: str
) -> None:
    suite_file = deployment / "expectations" / "suites" / "orders.json"
    if content is not None:
        suite_file.write_text(content)
    with pytest.raises(ConfigError) as raised:
        load_pipeline(pipeline(deployment))
    assert str(suite_file.resolve()) in str(raised.value) and fix in str(raised.value), raised.value
    code = cli.main(["plan", "--config", str(deployment / "pipelines" / "orders.yaml")])
    err = capsys.readouterr().err
    assert code == 2, err
    (line,) = [x for x in err.splitlines() if str(suite_file.resolve()) in x]
    assert "expectations_suite" in line and fix in line, err


def test_the_default_suite_is_gx_json_that_a_gx_file_context_over_the_folder_reads(tmp_path: Path) -> None:
    """expectations/ is a GX project folder: GX's own file context reads its suites, so GX's tools
    edit them (here on a copy: a context writes its own folders beside)."""
    from eos_ingest.quality.gx_import import import_gx, quiet_gx

    import_gx()
    with quiet_gx():
        import great_expectations as gx

    shutil.copytree(paths.EXPECTATIONS_DIR, tmp_path / "expectations")
    context = gx.get_context(mode="file", project_root_dir=None, context_root_dir=tmp_path / "expectations")
    read = context.suites.get("eos_default")
    doc = gx_suite.default_suite_doc()
    assert read.name == doc["name"] and len(read.expectations) == len(doc["expectations"])

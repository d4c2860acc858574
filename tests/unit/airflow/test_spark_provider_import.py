"""The door of eos_ingest/airflow/spark_provider_import.py: the DAG file parses without OpenLineage's
listener when OpenLineage is off, imports it as before when OpenLineage is on, and the door still pays
(a plain import of the provider's operator pulls the listener in).

Each case runs in a fresh interpreter, as the dag-processor's and a task's parse of the DAG file do:
this one may have imported the provider or OpenLineage already.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from eos_ingest import paths
from tests.helpers.fresh_python import python_stdout

LISTENER = "airflow.providers.openlineage.plugins.listener"

# Parse the DAG file as Airflow does (a module run from its path), then report what was imported.
PARSE = textwrap.dedent(
    f"""
    import json, runpy, sys
    dags = runpy.run_path(sys.argv[1])
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from airflow.providers.common.compat.openlineage.utils import spark as compat
    from eos_ingest.airflow.operator import BatchSparkSubmitOperator
    print(json.dumps({{
        "dag_ids": sorted(k for k in dags if k.startswith("eos_")),
        "listener": {LISTENER!r} in sys.modules,
        "subclass": issubclass(BatchSparkSubmitOperator, SparkSubmitOperator),
        "inject_from": compat.inject_parent_job_information_into_spark_properties.__module__,
    }}))
    """
)

# The provider's operator imported plainly, not through the door.
PLAIN = f"import sys, airflow.providers.apache.spark.operators.spark_submit; print(int({LISTENER!r} in sys.modules))"


def fresh_python(tmp_path: Path, code: str, *args: str, **env: str) -> str:
    """`code` in a fresh interpreter with a throw-away AIRFLOW_HOME and no OpenLineage settings but `env`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "OPENLINEAGE", "PYTEST"))}
    base.update(
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__UNIT_TEST_MODE="True",  # no config file written into AIRFLOW_HOME
        EOS_PIPELINES_DIR=str(paths.REPO_ROOT / "pipelines"),
        **env,
    )
    return python_stdout(["-c", code, *args], env=base, cwd=tmp_path).strip().splitlines()[-1]


def parse(tmp_path: Path, **env: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        fresh_python(tmp_path, PARSE, str(paths.REPO_ROOT / "dags" / "eos_pipelines.py"), **env)
    )
    return found


def test_the_dag_file_parses_without_the_openlineage_listener_when_openlineage_is_off(tmp_path: Path) -> None:
    found = parse(tmp_path)

    assert "eos_ingest__demo" in found["dag_ids"]
    assert found["subclass"]
    assert not found["listener"], "the DAG file's parse imported OpenLineage's listener"
    # The compat module's fallbacks, which the operator calls only with an injection option on.
    assert found["inject_from"] == "airflow.providers.common.compat.openlineage.utils.spark"


@pytest.mark.parametrize(
    "env",
    [
        {"AIRFLOW__OPENLINEAGE__TRANSPORT": '{"type": "console"}'},
        {"AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO": "True"},
    ],
    ids=["openlineage-on", "an-injection-option-on"],
)
def test_the_dag_file_imports_openlineage_as_the_provider_does_when_it_can_be_used(
    tmp_path: Path, env: dict[str, str]
) -> None:
    found = parse(tmp_path, **env)

    assert found["listener"]
    assert found["inject_from"] == "airflow.providers.openlineage.utils.spark"


def test_the_door_still_pays_a_plain_import_of_the_operator_pulls_in_the_listener(tmp_path: Path) -> None:
    # Exit: when this fails, the provider imports OpenLineage lazily; remove spark_provider_import.py.
    assert fresh_python(tmp_path, PLAIN) == "1"

"""A real Airflow run shows no secret that a pipeline file takes from the environment.

The e2e package's one `airflow standalone` (tests/e2e/conftest.py) runs the ingest DAG of
`leaks.yaml`, whose Kafka `sasl.password` is `${EOS_TEST_CANARY}` (the test broker is PLAINTEXT:
the SASL settings reach the Spark job's options but are not used), beside `broken.yaml`, whose
control_db_url quotes the canary after a mistake. Then the canary must be in none of: the files
under the stack's folder (every pipeline's task logs, the GX results and Data Docs, the control
DBs, Airflow's own files), the task logs and rendered fields through the REST API, the XComs, the
DAG import errors, and the Ingestion page and its JSON.

tests/e2e/test_airflow_e2e.py checks a canary of the Airflow connection the same way.
"""

from __future__ import annotations

import json

import httpx
import pytest

from tests.e2e.conftest import LEAKS_CANARY as CANARY
from tests.e2e.conftest import RUN_TIMEOUT_S, Stack

pytestmark = pytest.mark.e2e

DAG = "eos_ingest__leaks"


def test_a_dag_run_and_the_ui_show_no_secret_from_the_pipeline_file(stack: Stack) -> None:
    api = stack.api
    api.wait_for_dag(DAG)
    run_id = api.run(DAG)
    state = api.wait_for_run(DAG, run_id, RUN_TIMEOUT_S)
    tis = api.task_instances(DAG, run_id)
    assert state == "success", {t: ti["state"] for t, ti in tis.items()}

    shown: dict[str, str] = {}
    for task, ti in tis.items():
        shown[f"log of {task}"] = api.task_log(DAG, run_id, task)
        shown[f"rendered fields of {task}"] = json.dumps(ti.get("rendered_fields"))
        entries = api.get(f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/{task}/xcomEntries")["xcom_entries"]
        for entry in entries:
            shown[f"XCom {task}.{entry['key']}"] = json.dumps(api.xcom(DAG, run_id, task, entry["key"]))
    errors = json.dumps(api.get("/importErrors"))
    assert "broken.yaml" in errors and "control_db_url" in errors  # the mistake is shown...
    shown["DAG import errors"] = errors  # ...without the value's password
    pages = ["/eos-ingest/", "/eos-ingest/pipelines/leaks", "/eos-ingest/api/pipelines/leaks",
             "/eos-ingest/api/pipelines/broken"]  # fmt: skip
    headers = dict(api.client.headers)
    for page in pages:
        response = httpx.get(f"{api.base_url}{page}", headers=headers, timeout=60)
        assert response.status_code in (200, 422), (page, response.status_code)
        shown[f"page {page}"] = response.text
    assert "leaks" in shown["page /eos-ingest/"]
    assert any("data_docs" in p for p in map(str, (stack.root / "state" / "gx").rglob("*.html")))

    for where, text in shown.items():
        assert CANARY not in text, f"the canary shows in the {where}"
    files = [p for p in stack.root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert len(files) > 20  # task logs, GX results, Data Docs, the control DB, the tables
    leaks = [str(p) for p in files if CANARY.encode() in p.read_bytes()]
    assert leaks == [], f"the canary is in these files: {leaks}"

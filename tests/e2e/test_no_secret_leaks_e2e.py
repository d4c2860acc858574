"""A real Airflow run shows no secret that a pipeline file takes from the environment.

The e2e package's one `airflow standalone` (tests/e2e/conftest.py) runs the ingest DAG of
`leaks.yaml`, whose Kafka `sasl.password` is `${EOS_TEST_CANARY}` (the test broker is PLAINTEXT:
the SASL settings reach the Spark job's options but are not used), beside `broken.yaml`, whose
control_db_url quotes the canary after a mistake. Then the canary must be in none of: the files
under the stack's folder (every pipeline's task logs, the GX results and Data Docs, the control
DBs, Airflow's own files), the task logs and rendered fields through the REST API, the XComs, the
DAG import errors, and the Ingestion page and its JSON.

The run starts with the stack (Stack.early_runs). Then `typo.yaml` appears beside them (issue 31
item 4): its control_db_url is the common `postgres://` typo, whose password, written in the file,
holds `/`, `+`, `=`, `%2F`, a space, both quotes and a backslash. The dag-processor's next parse
(every 15 s) reports it among the DAG import errors, and its page shows the error: neither may show
that password.

tests/e2e/test_airflow_e2e.py checks a canary of the Airflow connection the same way.
"""

from __future__ import annotations

import html
import json
import secrets
import time
from pathlib import Path

import httpx
import pytest
import yaml
from markupsafe import escape

from tests.e2e.airflow_api import POLL_S, AirflowApi
from tests.e2e.conftest import LEAKS_CANARY as CANARY
from tests.e2e.conftest import RUN_TIMEOUT_S, Stack

pytestmark = pytest.mark.e2e

DAG = "eos_ingest__leaks"
TYPO_CANARY = f"S3CR3T-TYPO-{secrets.token_hex(4)}/x+y=%2Fz w'q\"\\v"


def shown_forms(secret: str) -> set[str]:
    """The secret and each of its words as text, a repr, JSON (also JSON in JSON) and HTML show them."""
    forms = set()
    for piece in {secret, *secret.split()}:
        once = json.dumps(piece)[1:-1]
        forms |= {
            piece,
            repr(piece)[1:-1],
            once,
            json.dumps(once)[1:-1],
            html.escape(piece),
            str(escape(piece)),
        }
    return forms


def wait_for_import_error(api: AirflowApi, file: str, timeout_s: float = 120) -> str:
    """The DAG import errors as JSON once they name `file` (the dag-processor parses every 15 s)."""
    deadline = time.monotonic() + timeout_s
    while True:
        errors = json.dumps(api.get("/importErrors"))
        if file in errors or time.monotonic() > deadline:
            return errors
        time.sleep(POLL_S)


def test_a_dag_run_and_the_ui_show_no_secret_from_the_pipeline_file(stack: Stack) -> None:
    api = stack.api
    api.wait_for_dag(DAG)
    typo = stack.root / "pipelines" / "typo.yaml"
    doc = yaml.safe_load((stack.root / "pipelines" / "broken.yaml").read_text())
    typo.write_text(
        yaml.safe_dump({**doc, "name": "typo", "control_db_url": f"postgres://eos:{TYPO_CANARY}@db/eos"})
    )
    try:
        check_the_run_and_the_ui(stack, typo)
    finally:
        typo.unlink()  # the later e2e tests see the pipelines folder they expect


def check_the_run_and_the_ui(stack: Stack, typo: Path) -> None:
    api = stack.api
    run_id = stack.early_runs[DAG]
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
    errors = wait_for_import_error(api, "typo.yaml")
    assert "broken.yaml" in errors and "control_db_url" in errors  # the mistake is shown...
    assert "postgres://eos:***@db/eos" in errors
    shown["DAG import errors"] = errors  # ...without the value's password
    pages = ["/eos-ingest/", "/eos-ingest/pipelines/leaks", "/eos-ingest/api/pipelines/leaks",
             "/eos-ingest/api/pipelines/broken", "/eos-ingest/pipelines/typo",
             "/eos-ingest/api/pipelines/typo"]  # fmt: skip
    headers = dict(api.client.headers)
    for page in pages:
        response = httpx.get(f"{api.base_url}{page}", headers=headers, timeout=60)
        assert response.status_code in (200, 422), (page, response.status_code)
        shown[f"page {page}"] = response.text
    assert "leaks" in shown["page /eos-ingest/"]
    assert any("data_docs" in p for p in map(str, (stack.root / "state" / "gx").rglob("*.html")))

    for where, text in shown.items():
        assert CANARY not in text, f"the canary shows in the {where}"
        leaked = sorted(form for form in shown_forms(TYPO_CANARY) if form in text)
        assert not leaked, f"typo.yaml's password shows in the {where}: {leaked}"
    files = [p for p in stack.root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert len(files) > 20  # task logs, GX results, Data Docs, the control DB, the tables
    leaks = [str(p) for p in files if CANARY.encode() in p.read_bytes()]
    assert leaks == [], f"the canary is in these files: {leaks}"
    forms = [form.encode() for form in shown_forms(TYPO_CANARY)]
    leaks = [str(p) for p in files if p != typo and any(form in p.read_bytes() for form in forms)]
    assert leaks == [], f"typo.yaml's password is in these files: {leaks}"

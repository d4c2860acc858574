"""The Ingestion page honours the permissions of a real auth manager that has per-DAG rights: FAB.

Airflow's API server app (create_app, with the plugin mounted as the API server mounts it) runs in
its own process with the FAB auth manager over a temporary SQLite metadata DB (`airflow db migrate`
creates FAB's user and role tables). FAB roles grant read on `DAG:<dag id>` resources, users log in
with their passwords (FAB's POST /auth/token), and the auth manager alone decides. No second
`airflow standalone`; Kafka is a closed port (the page shows its DB part and the broker's error).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from eos_ingest import paths
from eos_ingest.control.store import ControlStore
from eos_ingest.plan.ranges import Plan, PlannedRange, TopicPartition
from tests.helpers.ports import free_port

pytestmark = pytest.mark.integration

FAB = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
BETA_MARKER = "beta-batch-error-7f3a"  # in beta's failed batch: must reach no user without access
ROLES = {
    "alpha_readers": ["DAG:eos_ingest__alpha", "DAG:eos_backfill__alpha"],
    "alpha_ingest_only": ["DAG:eos_ingest__alpha"],  # not its backfill DAG: not enough
    "no_dags": [],
}
USERS = {"alice": "alpha_readers", "ivan": "alpha_ingest_only", "bob": "no_dags", "vera": "Viewer"}
PIPELINE_PATHS = [
    f"/eos-ingest/{kind}/{name}" for name in ("alpha", "beta") for kind in ("pipelines", "api/pipelines")
]
DOCS = ["validations/alpha/alpha-batch-1-gate/run/batch.html", "validations/beta/beta-batch-1-gate/run/batch.html",
        "expectations/beta.html", "index.html", "static/styles/site.css"]  # fmt: skip
PATHS = ["/eos-ingest/", *PIPELINE_PATHS, *(f"/eos-ingest/data-docs/{d}" for d in DOCS)]


def pipeline(folder: Path, name: str, db: Path) -> None:
    doc = {
        "name": name,
        "topics": [f"{name}_orders"],
        "kafka": {"bootstrap.servers": f"127.0.0.1:{free_port()}"},  # nothing listens there
        "kafka_conn_id": None,
        "value": {"format": "raw"},
        "control_db_url": f"sqlite:///{db}",
    }
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    store = ControlStore(f"sqlite:///{db}")
    store.ensure_schema()
    plan = Plan(
        ranges=(PlannedRange(f"{name}_orders", 0, 0, 10),),
        new_partitions=(TopicPartition(f"{name}_orders", 0),),
    )
    batch, _ = store.plan_scheduled(name, lambda committed: plan)
    assert batch is not None
    store.fail_batch(batch.batch_id, store.take_fence(batch.batch_id), f"ReadError: {name}-batch-error-7f3a")
    store.close()


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("fab")
    folder, state, dags = root / "pipelines", root / "state", root / "dags"
    for path in (folder, dags, root / "airflow"):
        path.mkdir()
    for name in ("alpha", "beta"):
        pipeline(folder, name, root / f"{name}.db")
    site = state / "gx" / "data_docs"
    for doc in DOCS:
        (site / doc).parent.mkdir(parents=True, exist_ok=True)
        (site / doc).write_text(f"<html>{doc}</html>")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(root / "airflow"),
        "AIRFLOW__CORE__AUTH_MANAGER": FAB,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{root / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(64),
        "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
        "EOS_PIPELINES_DIR": str(folder),
        "EOS_STATE_DIR": str(state),
    }
    airflow = Path(sys.executable).with_name("airflow")
    subprocess.run([str(airflow), "db", "migrate"], env=env, check=True, capture_output=True, timeout=600)
    spec, out = root / "spec.json", root / "answers.json"
    spec.write_text(json.dumps({"roles": ROLES, "users": USERS, "paths": PATHS}))
    run = subprocess.run(
        [sys.executable, "-m", "tests.integration.airflow.fab_page_app", str(spec), str(out)],
        env=env, cwd=paths.REPO_ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    result: dict[str, dict[str, dict[str, Any]]] = json.loads(out.read_text())
    return result


def rows(index: dict[str, Any]) -> set[str]:
    return {name for name in ("alpha", "beta") if f'href="pipelines/{name}"' in index["body"]}


def test_the_index_lists_a_pipeline_only_to_users_who_may_read_both_its_dags(answers: dict[str, Any]) -> None:
    index = {user: answers[user]["/eos-ingest/"] for user in USERS}
    assert all(page["status"] == 200 for page in index.values()), index
    assert rows(index["alice"]) == {"alpha"}
    assert rows(index["ivan"]) == set() and rows(index["bob"]) == set()
    assert rows(index["vera"]) == {"alpha", "beta"}  # FAB's Viewer reads every DAG
    for user in ("alice", "ivan", "bob"):
        assert "beta" not in index[user]["body"] and BETA_MARKER not in index[user]["body"], user


def test_a_pipeline_the_user_may_not_read_is_403_with_no_data(answers: dict[str, Any]) -> None:
    for user, allowed in (("alice", {"alpha"}), ("ivan", set()), ("bob", set()), ("vera", {"alpha", "beta"})):
        for path in PIPELINE_PATHS:
            answer, name = answers[user][path], path.rsplit("/", 1)[1]
            if name in allowed:
                assert answer["status"] == 200 and f"{name}-batch-error-7f3a" in answer["body"], (user, path)
            else:
                assert answer["status"] == 403, (user, path, answer["status"])
                assert "batch-error" not in answer["body"] and "_orders" not in answer["body"], (user, path)
                assert f"ask for read access to the DAGs eos_ingest__{name} and eos_backfill__{name}" in (
                    answer["body"].replace("&#39;", "'")
                )


def test_data_docs_follow_the_pipelines_and_are_sandboxed(answers: dict[str, Any]) -> None:
    def docs(user: str, doc: str) -> dict[str, Any]:
        answer: dict[str, Any] = answers[user][f"/eos-ingest/data-docs/{doc}"]
        return answer

    alpha_run, beta_run, beta_suite, home, css = DOCS
    assert (
        docs("alice", alpha_run)["status"] == 200
        and docs("alice", alpha_run)["body"] == f"<html>{alpha_run}</html>"
    )
    for doc in (beta_run, beta_suite, home):  # the home page lists beta's runs too
        assert docs("alice", doc)["status"] == 403 and "<html>" not in docs("alice", doc)["body"], doc
    assert docs("bob", alpha_run)["status"] == 403 and docs("bob", css)["status"] == 200
    for doc in DOCS:
        assert docs("vera", doc)["status"] == 200, doc
        assert docs("vera", doc)["csp"].startswith("sandbox; default-src 'none'"), doc

"""`docker compose up`, run for real: the compose file a user runs, from a fresh clone.

Only under `make compose-test` (EOS_COMPOSE_TEST=1): it needs a Docker Engine with Compose v2
(scripts/docker.sh install) and builds three images, which takes far longer than `make test` allows.
Steps, each timed into $EOS_STATE_DIR/compose-test/times.json:

1. a fresh clone of the repository's HEAD in a temporary folder; the host's extra CA certificates
   (/usr/local/share/ca-certificates/*.crt, for a TLS-inspecting proxy) copied into its
   docker/ca-certificates/ (see the README there); the base image debian:bookworm-slim made when no
   registry has it (scripts/docker.sh base-image);
2. ``docker compose up -d --build --wait`` in the clone (project eos-compose-test);
3. the demo stream (eos_ingest.demo_stream, the producer of `make demo`) into the compose Kafka from
   the host, at 127.0.0.1:9092;
4. the DAG eos_ingest__demo triggered through the api-server's REST API (a token from /auth/token
   with the admin password airflow-init generated), its run succeeds, and so does every other run
   (the scheduled run of the latest interval, which starts on the first parse, may be the one that
   ingests the stream);
5. ``docker compose exec airflow-scheduler eos-ingest verify --pipeline demo``: 0 duplicates, 0 missing;
6. the Ingestion page (/eos-ingest/) answers with the token and refuses without it;
7. ``docker compose down -v`` leaves no container, network or volume of the project.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.airflow_api import AirflowApi

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.environ.get("EOS_COMPOSE_TEST") != "1", reason="docker compose up: `make compose-test` only"
    ),
]

REPO = Path(__file__).resolve().parents[2]
STATE = Path(os.environ.get("EOS_STATE_DIR") or REPO / ".state")
PROJECT = "eos-compose-test"
DAG = "eos_ingest__demo"
URL = "http://127.0.0.1:8080"
PASSWORDS = "/opt/eos/state/airflow/secrets/simple_auth_manager_passwords.json"
UP_TIMEOUT_S = int(os.environ.get("EOS_COMPOSE_UP_TIMEOUT", "3600"))  # builds included
RUN_TIMEOUT_S = int(os.environ.get("EOS_COMPOSE_RUN_TIMEOUT", "1800"))
TIMES: dict[str, float] = {}


def docker() -> str:
    return subprocess.run(
        [str(REPO / "scripts/docker.sh"), "docker"], check=True, capture_output=True, text=True
    ).stdout.strip()


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


class Compose:
    """`docker compose -p eos-compose-test` in the clone; every call bounded and logged."""

    def __init__(self, folder: Path, log: Path) -> None:
        self.folder, self.log = folder, log
        self.base = [docker(), "compose", "-p", PROJECT]

    def __call__(self, *args: str, timeout: float = 600, check: bool = True, stdin: str | None = None) -> str:
        with self.log.open("a") as log:
            log.write(f"\n$ docker compose {' '.join(args)}\n")
            log.flush()
            done = subprocess.run(
                [*self.base, *args], cwd=self.folder, stdout=subprocess.PIPE, stderr=log, text=True,
                timeout=timeout, env={**os.environ, "COMPOSE_PROGRESS": "plain"}, input=stdin,
            )  # fmt: skip
            log.write(done.stdout)
        if check and done.returncode != 0:
            raise AssertionError(f"docker compose {' '.join(args)} exited {done.returncode}; see {self.log}")
        return done.stdout


def timed(name: str, started: float) -> None:
    TIMES[name] = round(time.monotonic() - started, 1)
    out = STATE / "compose-test" / "times.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(TIMES, indent=2) + "\n")


def project_leftovers() -> dict[str, list[str]]:
    label = f"label=com.docker.compose.project={PROJECT}"
    found = {}
    for kind, command in (
        ("containers", ["ps", "-aq", "--filter", label]),
        ("networks", ["network", "ls", "-q", "--filter", label]),
        ("volumes", ["volume", "ls", "-q", "--filter", label]),
    ):
        out = subprocess.run([docker(), *command], check=True, capture_output=True, text=True).stdout
        found[kind] = out.split()
    return found


@pytest.fixture(scope="module")
def compose(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Compose]:
    for port in (8080, 9092):
        assert port_free(port), f"port {port} is taken; compose publishes Kafka on 9092 and Airflow on 8080"
    started = time.monotonic()
    clone = tmp_path_factory.mktemp("compose") / "eos-ingest"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    for cert in Path("/usr/local/share/ca-certificates").glob("*.crt"):
        shutil.copy(cert, clone / "docker/ca-certificates" / cert.name)
    subprocess.run(
        [str(clone / "scripts/docker.sh"), "base-image"],
        check=True,
        env={**os.environ, "EOS_STATE_DIR": str(STATE)},
    )
    timed("clone_and_base_image", started)
    log = STATE / "compose-test" / "compose.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    project = Compose(clone, log)
    try:
        started = time.monotonic()
        project(
            "up", "-d", "--build", "--wait", "--wait-timeout", str(UP_TIMEOUT_S), timeout=UP_TIMEOUT_S + 60
        )
        timed("up_build_wait", started)
        yield project
    finally:
        project("logs", "--no-color", "--tail", "200", check=False, timeout=120)
        started = time.monotonic()
        project("down", "-v", "--remove-orphans", timeout=300)
        timed("down", started)


def test_docker_compose_up_ingests_the_demo_exactly_once(compose: Compose) -> None:
    started = time.monotonic()
    produced = subprocess.run(
        [sys.executable, "-m", "eos_ingest.demo_stream", "--bootstrap", "127.0.0.1:9092"],
        cwd=REPO, check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert json.loads(produced.stdout), produced.stdout
    timed("demo_stream", started)

    password = json.loads(compose("exec", "-T", "airflow-apiserver", "cat", PASSWORDS))["admin"]
    api = AirflowApi(URL, "admin", password)
    started = time.monotonic()
    api.wait_for_dag(DAG, timeout_s=300)
    run_id = api.run(DAG)
    state = api.wait_for_run(DAG, run_id, timeout_s=RUN_TIMEOUT_S)
    timed("dag_run", started)
    assert state == "success", f"{DAG} run {run_id} is {state}: {api.task_states(DAG, run_id)}"
    # The DAG is scheduled too: the run of its latest interval starts when it is first parsed and may
    # be the one that ingests the stream (the manual one then finds nothing new). All must succeed.
    runs = all_runs_finished(api)
    timed("all_dag_runs", started)
    assert all(r["state"] == "success" for r in runs), runs

    started = time.monotonic()
    verify = json.loads(
        compose("exec", "-T", "airflow-scheduler", "eos-ingest", "verify", "--pipeline", "demo")
    )
    timed("verify", started)
    assert verify.get("duplicates") == 0 and verify.get("missing") == 0, verify

    page = f"{URL}/eos-ingest/"
    assert httpx.get(page, timeout=30).status_code in (401, 403), "the Ingestion page answers without a login"
    response = httpx.get(page, headers={"Authorization": f"Bearer {api_token(password)}"}, timeout=30)
    assert response.status_code == 200 and "demo" in response.text, (
        response.status_code,
        response.text[:500],
    )


# The demo's topic into an Iceberg table of the image's jars: the JDBC catalog in the deployment's
# PostgreSQL control DB (EOS_CONTROL_DB_URL), the warehouse in the state volume.
ICEBERG_PIPELINE = """\
name: demo_iceberg
topics: [demo_events]
kafka: {bootstrap.servers: "kafka:29092"}
start_from: earliest
value:
  format: json
  schema: "event_id BIGINT, user_id STRING, action STRING, amount DOUBLE, event_time TIMESTAMP"
output: {format: iceberg, table: lake.demo_events, path: tables/demo_iceberg, partition_by: [event_date]}
schedule: null
"""


def test_the_image_runs_an_iceberg_pipeline_of_the_demo_topic_exactly_once(compose: Compose) -> None:
    """After the demo (its topic is there): `eos-ingest run` and `verify` of an Iceberg pipeline in
    the scheduler's container, with nothing but the image (Iceberg's jars, pyiceberg)."""
    config = "/opt/eos/state/demo_iceberg.yaml"
    scheduler = ("exec", "-T", "airflow-scheduler")
    compose(*scheduler, "sh", "-c", f"cat > {config}", stdin=ICEBERG_PIPELINE)
    started = time.monotonic()
    ran = json.loads(
        compose(*scheduler, "eos-ingest", "run", "--config", config, "--master", "local[1]", timeout=900)
    )
    timed("iceberg_run", started)
    assert ran["status"] == "committed" and ran["records_written"] > 0, ran  # the batch's summary
    verify = json.loads(compose(*scheduler, "eos-ingest", "verify", "--config", config, timeout=600))
    assert verify.get("ok") is True and verify.get("expected", 0) > 0, verify


def all_runs_finished(api: AirflowApi) -> list[dict[str, str]]:
    """Every run of the DAG once none is queued or running (bounded by RUN_TIMEOUT_S)."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        runs = [
            {"run_id": r["dag_run_id"], "state": r["state"]}
            for r in api.get(f"/dags/{DAG}/dagRuns")["dag_runs"]
        ]
        if all(r["state"] in ("success", "failed") for r in runs) or time.monotonic() > deadline:
            return runs
        time.sleep(3)


def api_token(password: str) -> str:
    response = httpx.post(f"{URL}/auth/token", json={"username": "admin", "password": password}, timeout=30)
    response.raise_for_status()
    return str(response.json()["access_token"])


def test_docker_compose_down_leaves_nothing(compose: Compose) -> None:
    """Runs last in this module: takes the project down itself and looks for what is left."""
    # The containers' logs first (into compose.log): after this down the fixture's teardown finds none.
    compose("logs", "--no-color", "--timestamps", check=False, timeout=120)
    compose("down", "-v", "--remove-orphans", timeout=300)
    assert project_leftovers() == {"containers": [], "networks": [], "volumes": []}

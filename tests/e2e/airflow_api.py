"""A small client of Airflow's REST API (/api/v2, JWT from /auth/token) with bounded waits."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote

import httpx

TERMINAL = {"success", "failed"}
# Polls of the api-server are cheap (one SQLite read): a short interval ends a wait about when the
# run or the parse does, where 3 s cost 1.5 s per wait on average, a dozen waits per e2e session.
POLL_S = 1.0


class AirflowApi:
    """Calls the api-server at `base_url` as `username`; every wait has a deadline."""

    def __init__(self, base_url: str, username: str, password: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.username, self.password = username, password  # the browser tests log in with them
        response = httpx.post(
            f"{self.base_url}/auth/token", json={"username": username, "password": password}, timeout=30
        )
        response.raise_for_status()
        token = response.json()["access_token"]
        # A read takes milliseconds, but one took over 30 s at load 37 on 2 cores (six suites at once).
        self.client = httpx.Client(
            base_url=f"{self.base_url}/api/v2", headers={"Authorization": f"Bearer {token}"}, timeout=120
        )

    def get(self, path: str, **params: Any) -> Any:
        response = self.client.get(path, params=params)
        response.raise_for_status()
        return response.json()

    def add_connection(self, connection: dict[str, Any]) -> None:
        """Create a connection in Airflow's database, as Admin -> Connections does."""
        self.client.post("/connections", json=connection).raise_for_status()

    def delete_connection(self, conn_id: str) -> None:
        self.client.delete(f"/connections/{quote(conn_id, safe='')}").raise_for_status()

    def wait_for_dag(self, dag_id: str, timeout_s: float = 180) -> dict[str, Any]:
        """The DAG once the dag-processor has parsed it (and it is unpaused)."""
        deadline = time.monotonic() + timeout_s
        while True:
            response = self.client.get(f"/dags/{dag_id}")
            if response.status_code == 200 and not response.json()["is_paused"]:
                return dict(response.json())
            if time.monotonic() > deadline:
                errors = self.get("/importErrors")
                raise TimeoutError(f"DAG {dag_id} not ready after {timeout_s}s; import errors: {errors}")
            time.sleep(POLL_S)

    def reparse(self, dag_id: str) -> None:
        """Ask the dag-processor to parse `dag_id`'s file now (PUT /parseDagFile, as the UI's
        reparse button does), rather than wait for its next periodic parse: a pipeline file just
        added or edited shows within seconds."""
        token = self.get(f"/dags/{dag_id}")["file_token"]
        self.client.put(f"/parseDagFile/{token}").raise_for_status()

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> httpx.Response:
        """POST a manual DAG run; the caller checks the status (400 when conf breaks the params)."""
        return self.client.post(f"/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf or {}})

    def run(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        """Trigger a run and return its id."""
        response = self.trigger(dag_id, conf)
        assert response.status_code == 200, response.text
        return str(response.json()["dag_run_id"])

    def wait_for_run(self, dag_id: str, run_id: str, timeout_s: float, poll_s: float = POLL_S) -> str:
        """The run's final state; TimeoutError with the task states when it takes too long. A
        timing (bench (g)) polls more often: the run's end is seen up to `poll_s` after it."""
        deadline = time.monotonic() + timeout_s
        while True:
            state = str(self.get(f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}")["state"])
            if state in TERMINAL:
                return state
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{dag_id} run {run_id} still {state} after {timeout_s}s: {self.task_states(dag_id, run_id)}"
                )
            time.sleep(poll_s)

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
        found = self.get(f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances")
        return {ti["task_id"]: ti for ti in found["task_instances"]}

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        return {task: ti["state"] for task, ti in self.task_instances(dag_id, run_id).items()}

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """The task's log as text (every structured line's event and error detail)."""
        found = self.get(
            f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/logs/{try_number}",
            full_content="true",
        )
        content = found.get("content", "")
        return content if isinstance(content, str) else "\n".join(json.dumps(c) for c in content)

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        path = f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/xcomEntries/{key}"
        return self.get(path)["value"]

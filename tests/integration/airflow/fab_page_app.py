"""Run by tests/integration/airflow/test_page_permissions.py in its own process (Airflow reads its
configuration once per process): Airflow's API server app with the FAB auth manager, real FAB
roles and users in the metadata DB, and the Ingestion page asked for paths by each user.

    python -m tests.integration.airflow.fab_page_app <spec.json> <answers.json>

spec.json: {"roles": {role: [DAG resource, ...]}, "users": {user: role}, "paths": [path, ...]}.
Each user logs in through FAB's POST /auth/token with a password; answers.json holds, per user and
path, the status code, the body and the Content-Security-Policy header.
"""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path


def main(spec_file: str, answers_file: str) -> None:
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from fastapi.testclient import TestClient

    from eos_ingest.service import status

    status.KAFKA_TIMEOUT_S = 0.5  # nothing listens at the pipelines' brokers; the page says so
    spec = json.loads(Path(spec_file).read_text())
    app = create_app("core")  # the API server's app: the plugin mounted at /eos-ingest, FAB at /auth
    auth_manager = get_auth_manager()
    passwords = {user: secrets.token_urlsafe(12) for user in spec["users"]}
    with auth_manager.flask_app.app_context():  # type: ignore[attr-defined]
        sm = auth_manager.security_manager  # type: ignore[attr-defined]
        for role_name, resources in spec["roles"].items():
            role = sm.find_role(role_name) or sm.add_role(role_name)
            for resource in resources:
                sm.add_permission_to_role(role, sm.create_permission("can_read", resource))
        for user, role_name in spec["users"].items():
            sm.add_user(
                user, user, user, f"{user}@example.org", [sm.find_role(role_name)], password=passwords[user]
            )

    client = TestClient(app)
    answers: dict[str, dict[str, dict[str, object]]] = {}
    for user, password in passwords.items():
        login = client.post("/auth/token", json={"username": user, "password": password})
        assert login.status_code == 201, (user, login.status_code, login.text)
        headers = {"Authorization": f"Bearer {login.json()['access_token']}"}
        answers[user] = {}
        for path in spec["paths"]:
            response = client.get(path, headers=headers)
            answers[user][path] = {
                "status": response.status_code,
                "body": response.text,
                "csp": response.headers.get("content-security-policy"),
            }
    Path(answers_file).write_text(json.dumps(answers))


if __name__ == "__main__":
    main(*sys.argv[1:])

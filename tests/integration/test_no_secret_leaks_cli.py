"""The CLI against a real broker and control DB shows no secret: a canary planted through ${VAR}
in the file's `sasl.password`, another in the Airflow connection's extra (AIRFLOW_CONN_<ID>), and,
on PostgreSQL, the server's real generated password in control_db_url.

`plan`, `status`, `abandon` (whose reason quotes a URL with the canary) and a refused config run
in-process; their stdout, stderr, every log record (librdkafka's included) and the batch rows of
the control DB must hold none of the secrets. The file's canary holds every character that ended
a match before (issue 31 item 4): `/`, `+`, `=`, `%2F`, a space, both quotes and a backslash. The unit test tests/unit/test_no_secret_leaks.py
covers config errors, DAG import errors and the plugin's pages.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml
from sqlalchemy.engine import make_url

from eos_ingest.cli import main as cli_main
from eos_ingest.control.store import ControlStore
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration

CANARY = "S3CR3T-CANARY-file/x+y=%2Fz w'q\"\\v"
CONN_CANARY = "S3CR3T-CANARY-conn/x+y=="  # a word of sasl.oauthbearer.config's: no space


def test_cli_commands_show_no_secret(
    tmp_path: Path,
    kafka_bootstrap: str,
    make_topic,
    control_db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    secrets = [CANARY, CONN_CANARY]
    db_password = make_url(control_db_url).password
    if db_password:
        secrets.append(db_password)  # the PostgreSQL of scripts/postgres.sh has a real one
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.begin()
    producer.send(topic, [{"id": i} for i in range(10)])
    producer.commit()

    monkeypatch.setenv("EOS_TEST_CANARY", CANARY)
    # The connection adds a secret the file leaves out, as a deployment keeps them there.
    extra = {"sasl.oauthbearer.config": f"principal=svc secret={CONN_CANARY}"}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SECRETS", json.dumps({"conn_type": "kafka", "extra": extra}))
    doc = {
        "name": "leaks",
        "topics": [topic],
        # PLAINTEXT: the broker of the tests; librdkafka ignores the SASL settings, but keeps them.
        "kafka": {"bootstrap.servers": kafka_bootstrap, "sasl.username": "svc",
                  "sasl.password": "${EOS_TEST_CANARY}"},
        "kafka_conn_id": "kafka_secrets",
        "value": {"format": "json", "schema": "id BIGINT"},
        "output": {"path": str(tmp_path / "tables" / "leaks")},
        "control_db_url": control_db_url,
        "schedule": None,
    }  # fmt: skip
    pipeline = tmp_path / "leaks.yaml"
    pipeline.write_text(yaml.safe_dump(doc))
    caplog.set_level(logging.DEBUG)

    shown: list[str] = []

    def run(*argv: str) -> int:
        code = cli_main([*argv, "--config", str(pipeline)] if "--config" not in argv else list(argv))
        out, err = capsys.readouterr()
        shown.append(f"$ eos-ingest {argv[0]} -> {code}\n{out}\n{err}")  # not the reason we typed
        return code

    assert run("plan") == 0
    assert run("status") == 0
    store = ControlStore(control_db_url)
    try:
        (batch,) = store.list_batches("leaks", limit=1)
        reason = f"moving to postgresql://svc:{CANARY}@db/x with sasl.password={CANARY}"
        assert run("abandon", "--batch-id", str(batch.batch_id), "--reason", reason) == 0
        assert run("status") == 0
        (abandoned,) = store.list_batches("leaks", limit=1)
        assert abandoned.error and "postgresql://svc:***@db/x" in abandoned.error
        rows = [repr(b) for b in store.list_batches("leaks", limit=10)]
    finally:
        store.close()

    # The file and the connection disagree on a secret: refused, naming the key, not the values.
    extra["sasl.password"] = CONN_CANARY
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SECRETS", json.dumps({"conn_type": "kafka", "extra": extra}))
    assert run("status") == 2
    assert "sasl.password" in shown[-1]

    everything = {
        "CLI output": "\n".join(shown),
        "log records": "\n".join(r.getMessage() for r in caplog.records),
        "batch rows": "\n".join(rows),
    }
    if control_db_url.startswith("sqlite:///"):
        everything["control DB file"] = (
            Path(control_db_url.removeprefix("sqlite:///")).read_bytes().decode("utf-8", "replace")
        )
    for where, text in everything.items():
        for secret in secrets:
            for form in {secret, *secret.split(), repr(secret)[1:-1], json.dumps(secret)[1:-1]}:
                assert form not in text, f"a secret shows in the {where}: {form!r}"
    assert "ConfigError" in shown[-1] and '"total_lag"' in shown[1]  # the commands did show things

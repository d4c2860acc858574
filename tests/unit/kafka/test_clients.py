"""A kafka setting librdkafka refuses ends the command with one ConfigError line, before any work.

librdkafka checks the settings as a client is built; before this, the planner's AdminClient let its
KafkaException out as a traceback. No broker is needed: the client is refused before it connects.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from eos_ingest.control.store import ControlStore
from eos_ingest.errors import ConfigError
from eos_ingest.kafka.committed_counts import read_committed_consumer

REFUSED = {
    "a number that is not one": ({"fetch.wait.max.ms": "abc"}, '"fetch.wait.max.ms"'),
    "a number out of range": ({"fetch.wait.max.ms": "-5"}, "outside allowed range 0..300000"),
    "an unknown name": ({"fetch.wait.max.msec": "10"}, '"fetch.wait.max.msec"'),
    "a choice not offered": ({"security.protocol": "tls"}, '"security.protocol"'),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_plan_names_the_refused_setting_in_one_line_and_plans_nothing(case: str, tmp_path: Path) -> None:
    settings, named = REFUSED[case]
    db = f"sqlite:///{tmp_path / 'refused.db'}"
    doc = {
        "name": "refused",
        "topics": ["any-topic"],
        "kafka": {"bootstrap.servers": "127.0.0.1:9", **settings},
        "kafka_conn_id": None,
        "value": {"format": "json", "schema": "id BIGINT"},
        "output": {"path": str(tmp_path / "tables" / "refused")},
        "control_db_url": db,
        "schedule": None,
    }
    path = tmp_path / "refused.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")

    job = subprocess.run(
        [sys.executable, "-m", "eos_ingest.cli", "plan", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )

    lines = [line for line in job.stderr.splitlines() if line.strip()]
    assert job.returncode == 2, (job.stdout, job.stderr)
    assert len(lines) == 1, job.stderr  # no traceback
    assert lines[0].startswith("eos-ingest: ConfigError: librdkafka refused a kafka setting: "), lines[0]
    assert named in lines[0] and "`kafka:` settings" in lines[0], lines[0]
    store = ControlStore(db)
    try:
        store.ensure_schema()
        assert store.list_batches("refused") == []
    finally:
        store.close()


def test_the_independent_recount_refuses_the_same_setting_as_config() -> None:
    with pytest.raises(ConfigError, match=r"fetch\.wait\.max\.ms"):
        read_committed_consumer({"bootstrap.servers": "127.0.0.1:9", "fetch.wait.max.ms": "-5"})

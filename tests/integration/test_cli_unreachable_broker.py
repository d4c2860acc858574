"""The CLI against a closed port: exit 75 within a bounded deadline, one clear line, no librdkafka noise."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.helpers.ports import free_port

log = logging.getLogger(__name__)


def test_plan_run_status_against_a_closed_port_exit_75_with_one_clear_line(tmp_path: Path) -> None:
    port = free_port()  # bound then released: nothing listens there
    folder = tmp_path / "pipelines"
    folder.mkdir()
    config = folder / "nowhere.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "nowhere",
                "topics": ["events"],
                "kafka": {"bootstrap.servers": f"127.0.0.1:{port}"},
                "value": {"format": "json", "schema": "id BIGINT"},
                "output": {"path": str(tmp_path / "tables" / "nowhere")},
                "control_db_url": f"sqlite:///{tmp_path / 'control.db'}",
            }
        )
    )
    started = time.monotonic()
    jobs = {
        command: subprocess.Popen(
            [sys.executable, "-m", "eos_ingest.cli", command, "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for command in ("plan", "run", "status")
    }
    for command, job in jobs.items():
        out, err = job.communicate(timeout=120)
        elapsed = time.monotonic() - started
        log.warning(
            "eos-ingest %s against a closed port: exit %s after %.1f s", command, job.returncode, elapsed
        )
        print(f"eos-ingest {command}: exit {job.returncode} after {elapsed:.1f} s")
        assert job.returncode == 75, (command, out, err)
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, (command, err)
        line = lines[0]
        assert line.startswith("eos-ingest: KafkaUnavailableError: Kafka at 127.0.0.1:")
        assert f"127.0.0.1:{port}" in line and "the batch is unchanged" in line
        assert "Check that the broker is up" in line
        assert "rdkafka" not in err and "FAIL|" not in err
        assert elapsed < 60, f"eos-ingest {command} took {elapsed:.1f} s to give up"

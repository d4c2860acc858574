"""scripts/postgres.sh run as root from a state folder the `postgres` OS user cannot reach."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from eos_ingest import paths
from tests.fixtures.kafka import free_port

pytestmark = pytest.mark.integration

SCRIPT = paths.REPO_ROOT / "scripts" / "postgres.sh"


def script(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), command], env=env, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another OS user")
def test_up_works_from_a_state_folder_postgres_cannot_reach_and_down_leaves_nothing_running() -> None:
    private = Path(tempfile.mkdtemp(prefix="eos-pg-test-"))  # mode 700, owned by root, like `mktemp -d`
    assert private.stat().st_mode & 0o777 == 0o700
    env = {**os.environ, "EOS_STATE_DIR": str(private / "state"), "EOS_PG_PORT": str(free_port())}
    home: Path | None = None
    try:
        up = script("up", env)
        assert up.returncode == 0, up.stderr
        home = Path(script("home", env).stdout.strip())
        assert not home.is_relative_to(private) and home.owner() == "postgres"
        assert home.stat().st_mode & 0o777 == 0o700
        assert "Permission denied" not in up.stderr
        again = script("up", env)
        assert again.returncode == 0 and "already running" in again.stderr, again.stderr
        engine = create_engine(script("url", env).stdout.strip())
        try:
            with engine.connect() as conn:
                assert conn.execute(text("SELECT 1")).scalar_one() == 1
        finally:
            engine.dispose()
    finally:
        down = script("down", env)
        status = script("status", env)
        if home is not None:
            shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)
    assert down.returncode == 0, down.stderr
    assert status.returncode == 3

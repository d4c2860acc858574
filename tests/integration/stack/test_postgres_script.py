"""scripts/postgres.sh run as root from a state folder the `postgres` OS user cannot reach."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from eos_ingest import paths
from tests.helpers.ports import free_port

pytestmark = pytest.mark.integration

SCRIPT = paths.REPO_ROOT / "scripts" / "postgres.sh"


def script(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), command], env=env, capture_output=True, text=True, timeout=600, check=False
    )


def assert_answers(url: str) -> None:
    """The server at `url` takes a login and answers a query."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()


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
        assert_answers(script("url", env).stdout.strip())
    finally:
        down = script("down", env)
        status = script("status", env)
        if home is not None:
            shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)
    assert down.returncode == 0, down.stderr
    assert status.returncode == 3


def test_a_tcp_login_needs_the_generated_password(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any local user reaches 127.0.0.1: the superuser must not log in there without the password,
    which only the state folder's 600 file and `url` hold."""
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.exc import OperationalError

    # libpq would otherwise try a password from the environment or ~/.pgpass.
    monkeypatch.delenv("PGPASSWORD", raising=False)
    folder = Path(tempfile.mkdtemp(prefix="eos-pg-auth-"))
    monkeypatch.setenv("PGPASSFILE", str(folder / "no-pgpass"))
    env = {**os.environ, "EOS_STATE_DIR": str(folder / "state"), "EOS_PG_PORT": str(free_port())}
    home: Path | None = None
    try:
        up = script("up", env)
        assert up.returncode == 0, up.stderr
        home = Path(script("home", env).stdout.strip())
        url = make_url(script("url", env).stdout.strip())
        password_file = home / "superuser.password"
        assert url.password and len(url.password) >= 24 and password_file.read_text() == url.password
        assert password_file.stat().st_mode & 0o777 == 0o600
        assert url.password not in up.stdout + up.stderr  # `up` says where it is, not what
        # (URL.set(password=None) would keep the password: None there means "unchanged".)
        without = URL.create(url.drivername, url.username, None, url.host, url.port, url.database)
        for refused in (without, url.set(password="wrong")):
            engine = create_engine(refused, connect_args={"connect_timeout": 10})
            try:
                with pytest.raises(OperationalError, match="password"):
                    engine.connect().close()
            finally:
                engine.dispose()
        engine = create_engine(url)
        try:
            with engine.connect() as conn:
                assert conn.execute(text("SELECT current_user")).scalar_one() == "postgres"
        finally:
            engine.dispose()
        again = script("up", env)  # a second `up` keeps the password
        assert again.returncode == 0 and script("url", env).stdout.strip() == url.render_as_string(
            hide_password=False
        )
    finally:
        down = script("down", env)
        if home is not None:
            shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
    assert down.returncode == 0, down.stderr


def test_the_default_port_is_outside_the_ephemeral_range() -> None:
    """No client connection nor port-0 server (Spark's, Py4J's, a test broker's) can hold the
    default port when the server starts: 55432 once was held, and a worker's PostgreSQL tests all
    failed."""
    default = re.search(r'PORT="\$\{EOS_PG_PORT:-(\d+)\}"', SCRIPT.read_text())
    assert default is not None
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert not low <= int(default.group(1)) <= high, (default.group(1), low, high)


def test_up_on_another_port_moves_the_running_server_there() -> None:
    """A server left running on another port (an older default) is restarted on EOS_PG_PORT, so
    that `url` names where it listens."""
    folder = Path(tempfile.mkdtemp(prefix="eos-pg-port-"))
    first = {**os.environ, "EOS_STATE_DIR": str(folder / "state"), "EOS_PG_PORT": str(free_port())}
    second = {**first, "EOS_PG_PORT": str(free_port())}
    home: Path | None = None
    try:
        assert script("up", first).returncode == 0
        home = Path(script("home", first).stdout.strip())
        moved = script("up", second)
        assert moved.returncode == 0 and "already running" not in moved.stderr, moved.stderr
        assert f"restarting it on {second['EOS_PG_PORT']}" in moved.stderr, moved.stderr
        url = script("url", second).stdout.strip()
        assert f":{second['EOS_PG_PORT']}/" in url
        assert_answers(url)
    finally:
        down = script("down", second)
        if home is not None:
            shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
    assert down.returncode == 0, down.stderr

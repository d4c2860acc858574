"""A state folder whose jar folder holds the two names local_jars() asks for: enough for code
that only lists the jars (the spark-submit command line, the class-data archive's key)."""

from __future__ import annotations

from pathlib import Path

import pytest

JAR_NAMES = ("spark-sql-kafka-0-10_2.13-4.1.3.jar", "delta-spark_4.1_2.13-4.4.0.jar")


def fake_jars_state(state: Path) -> Path:
    """`state` with empty jar files under jars/spark (as `make setup` lays them out)."""
    folder = state / "jars" / "spark"
    folder.mkdir(parents=True)
    for name in JAR_NAMES:
        (folder / name).write_bytes(b"")
    return state


def local_jars_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """EOS_STATE_DIR at a fake-jars state folder under `tmp_path`, and no driver JVM options from
    the environment (the two-core profile applies): the state a local master's options are built in."""
    folder = fake_jars_state(tmp_path / "state")
    monkeypatch.setenv("EOS_STATE_DIR", str(folder))
    monkeypatch.delenv("EOS_DRIVER_JVM_PROFILE", raising=False)
    monkeypatch.delenv("EOS_DRIVER_JAVA_OPTIONS", raising=False)
    return folder

"""The job's class-data archive option (eos_ingest/spark/class_archive.py): given to local drivers only,
only when an archive for this JDK and these jars exists, quoted as Spark splits options."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from eos_ingest.spark import class_archive
from eos_ingest.spark.session import DRIVER_JVM_PROFILES
from eos_ingest.spark.submit import job_conf
from tests.helpers.fake_jars import fake_jars_state, local_jars_env

OPTION = "spark.driver.extraJavaOptions"
LOCAL_DRIVER_JAVA_OPTIONS = DRIVER_JVM_PROFILES["two-core"]  # a job of unknown size


@pytest.fixture()
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state folder with the jar names local_jars() asks for (tests/helpers/fake_jars.py)."""
    return local_jars_env(tmp_path, monkeypatch)


def make_archive() -> Path:
    key = class_archive.archive_key()
    assert key is not None
    path = class_archive.archive_file(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"archive")
    return path


def test_a_local_job_maps_the_archive_once_it_exists(state: Path) -> None:
    assert job_conf("local[2]")[OPTION] == LOCAL_DRIVER_JAVA_OPTIONS
    path = make_archive()
    assert job_conf("local[2]")[OPTION] == f"{LOCAL_DRIVER_JAVA_OPTIONS} -XX:SharedArchiveFile={path}"
    assert OPTION not in job_conf("yarn") and OPTION not in job_conf("spark://host:7077")


def test_another_jar_set_looks_for_another_archive(state: Path) -> None:
    before = make_archive()
    (state / "jars" / "spark" / "kafka-clients-3.9.1.jar").write_bytes(b"")
    assert class_archive.archive_file(str(class_archive.archive_key())) != before
    assert job_conf("local[2]")[OPTION] == LOCAL_DRIVER_JAVA_OPTIONS


def test_a_path_with_spaces_and_quotes_is_one_word_for_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = fake_jars_state(tmp_path / 'my "state" dir')
    monkeypatch.setenv("EOS_STATE_DIR", str(folder))
    path = make_archive()
    # Spark's launcher splits extraJavaOptions with a shell's quoting rules (parseOptionString).
    assert shlex.split(str(class_archive.java_options())) == [f"-XX:SharedArchiveFile={path}"]


def test_no_jars_means_no_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "empty"))
    assert class_archive.archive_key() is None
    assert class_archive.java_options() is None
    assert class_archive.build() is None


def test_a_training_job_past_its_deadline_is_stopped_and_leaves_no_archive(
    state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = tmp_path / "spark-submit"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    monkeypatch.setattr(class_archive, "spark_submit_binary", lambda: str(slow))
    monkeypatch.setattr(class_archive, "BUILD_TIMEOUT_S", 1)
    monkeypatch.setattr("sys.argv", ["class_archive"])
    with pytest.raises(SystemExit) as stopped:
        class_archive.main()
    assert "ran past 1 s" in str(stopped.value.code) and "python -m eos_ingest.spark.class_archive" in str(
        stopped.value.code
    )
    key = class_archive.archive_key()
    assert key is not None and not list(class_archive.archive_file(key).parent.glob("driver-*"))

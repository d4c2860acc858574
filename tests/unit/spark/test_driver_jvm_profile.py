"""The local driver JVM's options: a named profile ("small-batches" for a job known to read few
records, "two-core" otherwise) that the submitting process's environment can change
(EOS_DRIVER_JVM_PROFILE), replace (EOS_DRIVER_JAVA_OPTIONS) or turn off ("none"); a cluster's
driver never gets them."""

from __future__ import annotations

from pathlib import Path

import pytest

from eos_ingest.errors import ConfigError
from eos_ingest.spark.session import DRIVER_JVM_PROFILES, SMALL_BATCH_RECORDS, local_driver_java_options
from eos_ingest.spark.submit import job_conf, local_session_conf
from tests.helpers.fake_jars import local_jars_env

OPTION = "spark.driver.extraJavaOptions"


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No class-data archive: the options are the profile's alone."""
    return local_jars_env(tmp_path, monkeypatch)


def test_the_two_core_profile_is_the_default_of_a_local_master() -> None:
    assert local_driver_java_options({}) == DRIVER_JVM_PROFILES["two-core"]
    assert "-XX:+UseParallelGC" in DRIVER_JVM_PROFILES["two-core"]
    assert "-XX:Tier4InvocationThreshold=20000" in DRIVER_JVM_PROFILES["two-core"]
    assert job_conf("local[2]")[OPTION] == DRIVER_JVM_PROFILES["two-core"]
    assert OPTION not in job_conf("spark://host:7077") and OPTION not in job_conf("yarn")


def test_the_none_profile_leaves_the_jvm_its_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EOS_DRIVER_JVM_PROFILE", "none")
    assert local_driver_java_options() == ""
    assert OPTION not in job_conf("local[2]")


def test_the_environments_options_replace_any_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EOS_DRIVER_JVM_PROFILE", "two-core")
    monkeypatch.setenv("EOS_DRIVER_JAVA_OPTIONS", " -XX:+UseG1GC -Xss4m ")
    assert job_conf("local[*]")[OPTION] == "-XX:+UseG1GC -Xss4m"
    monkeypatch.setenv("EOS_DRIVER_JAVA_OPTIONS", "")  # set and empty: no options at all
    assert OPTION not in job_conf("local[*]")


def test_an_unknown_profile_is_refused_with_the_known_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"EOS_DRIVER_JVM_PROFILE='four-core'.*none, small-batches, two-core"
    ):
        local_driver_java_options({"EOS_DRIVER_JVM_PROFILE": "four-core"})
    assert local_driver_java_options({"EOS_DRIVER_JVM_PROFILE": " "}) == DRIVER_JVM_PROFILES["two-core"]


def test_the_small_batches_profile_stops_at_c1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EOS_DRIVER_JVM_PROFILE", "small-batches")
    assert job_conf("local[2]")[OPTION] == "-XX:+UseParallelGC -XX:TieredStopAtLevel=1"


def test_a_job_known_to_be_small_gets_the_small_batches_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    small, two_core = DRIVER_JVM_PROFILES["small-batches"], DRIVER_JVM_PROFILES["two-core"]
    assert job_conf("local[2]", job_records=0)[OPTION] == small
    assert job_conf("local[2]", job_records=SMALL_BATCH_RECORDS)[OPTION] == small
    assert job_conf("local[2]", job_records=SMALL_BATCH_RECORDS + 1)[OPTION] == two_core
    assert job_conf("local[2]", job_records=None)[OPTION] == two_core
    assert OPTION not in job_conf("yarn", job_records=10)
    monkeypatch.setenv("EOS_DRIVER_JVM_PROFILE", "two-core")  # a profile named in the environment wins
    assert job_conf("local[2]", job_records=10)[OPTION] == two_core
    monkeypatch.setenv("EOS_DRIVER_JVM_PROFILE", "none")
    assert OPTION not in job_conf("local[2]", job_records=10)


def test_a_commands_own_session_gets_the_jobs_options_with_jvm_warnings_on_stderr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # verify and maintain print their JSON report on stdout: the JVM's warnings must not land there.
    assert local_session_conf() == {
        OPTION: f"-Xlog:disable -Xlog:all=warning:stderr {DRIVER_JVM_PROFILES['two-core']}"
    }
    assert local_session_conf(SMALL_BATCH_RECORDS) == {
        OPTION: f"-Xlog:disable -Xlog:all=warning:stderr {DRIVER_JVM_PROFILES['small-batches']}"
    }
    monkeypatch.setenv("EOS_DRIVER_JVM_PROFILE", "none")
    assert local_session_conf() == {}

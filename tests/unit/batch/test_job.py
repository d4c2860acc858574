"""The spark-submit job's command line (batch/job.py main): what it refuses before Spark starts."""

from __future__ import annotations

import pytest

from eos_ingest.batch.job import main


@pytest.mark.parametrize("name", ["", "pipelines/orders.yaml", "/abs/orders.yaml", "..", "."])
def test_the_job_refuses_a_config_file_that_is_not_a_file_name_before_spark_starts(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--config-file", name, "--batch-id", "1"]) == 2
    err = capsys.readouterr().err
    assert f"--config-file {name!r} is not a file name" in err and "--files" in err

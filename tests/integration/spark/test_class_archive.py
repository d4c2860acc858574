"""The job driver's class-data archive (eos_ingest/spark/class_archive.py), with the real JDK, Spark and
Delta: the archive `make setup` made maps Spark's and Delta's classes into a job's JVM, given as
submit.job_conf gives it, also from a path Spark must unquote."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from eos_ingest.spark import class_archive
from eos_ingest.spark.session import DELTA_CONF, LOCAL_CONF, local_jars, spark_submit_binary, spark_submit_env
from eos_ingest.spark.submit import job_conf

pytestmark = pytest.mark.integration

SHARED = "source: shared objects file"
SCRIPT = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.getOrCreate()
    spark.range(10).write.format("delta").save(sys.argv[1])
    assert spark.read.format("delta").load(sys.argv[1]).count() == 10
    spark.stop()
    """
)


def submit(
    tmp_path: Path, args: list[str], java_options: str = "", conf: dict[str, str] | None = None
) -> dict[str, str]:
    """spark-submit `args` with `java_options` as its driver's; where each class named in the
    driver JVM's class-load log came from."""
    log = tmp_path / "classes.txt"
    conf = {
        **(conf or {}),
        "spark.driver.extraJavaOptions": f"{java_options} -Xlog:class+load=info:file={log}",
    }
    argv = [spark_submit_binary()]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    done = subprocess.run(
        [*argv, *args], env=spark_submit_env(), capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    sources = {}
    for line in log.read_text().splitlines():
        _, _, rest = line.partition("[class,load] ")
        name, _, source = rest.partition(" ")
        sources[name] = source
    return sources


def run_job(tmp_path: Path, java_options: str) -> dict[str, str]:
    """A small Delta job, submitted with `java_options` as its driver's: its classes' sources."""
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    args = ["--master", "local[2]", "--jars", ",".join(local_jars()), str(script), str(tmp_path / "table")]
    return submit(tmp_path, args, java_options, {**DELTA_CONF, **LOCAL_CONF, "spark.log.level": "WARN"})


@pytest.fixture(scope="module")
def archive() -> Path:
    made = class_archive.build()  # made by `make setup`: then a no-op
    assert made is not None and made.is_file()
    return made


def test_a_local_job_maps_spark_and_delta_classes_from_the_archive_also_from_a_path_with_a_space(
    archive: Path, tmp_path: Path
) -> None:
    """The option job_conf gives (the parallel collector's too), its archive reached through a
    folder whose name has a space: Spark must pass the path to the JVM as one word. (One job for
    both claims: a job is ~17 s here.)"""
    option = job_conf("local[2]")["spark.driver.extraJavaOptions"]
    assert option.endswith(class_archive.archive_option(archive))
    spaced = tmp_path / "state dir" / archive.name
    spaced.parent.mkdir()
    spaced.symlink_to(archive)
    option = option.replace(class_archive.archive_option(archive), class_archive.archive_option(spaced))
    sources = run_job(tmp_path, option)
    for name in (
        "org.apache.spark.deploy.SparkSubmit",  # the class the test below finds in its jar
        "org.apache.spark.SparkContext",
        "org.apache.spark.sql.catalyst.analysis.Analyzer",
        "org.apache.spark.sql.delta.DeltaLog",  # from --jars, not the app class path
    ):
        assert sources[name].startswith(SHARED), (name, sources[name])
    shared = sum(source.startswith(SHARED) for source in sources.values())
    assert shared > 0.6 * len(sources), f"{shared} of {len(sources)} classes from the archive"


def test_without_the_option_spark_submit_loads_its_classes_from_their_jars(tmp_path: Path) -> None:
    """What the test above tells apart: a JVM that maps nothing but the JDK's own archive loads
    SparkSubmit (mapped there) from its jar. `spark-submit --version`, ~1 s of CPU: the same job
    without the option cost ~31 s of CPU in make test (2026-12-07) to tell the same."""
    source = submit(tmp_path, ["--version"])["org.apache.spark.deploy.SparkSubmit"]
    assert source.endswith(".jar") and not source.startswith(SHARED), source

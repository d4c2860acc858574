"""A class-data sharing archive for the job's driver JVM on local masters.

A batch job's JVM loads ~23,000 classes (Spark, Scala, Delta, the Kafka source) and verifies and
parses each one: seconds of CPU at every start, on every batch. The JDK can map classes from an
archive written by an earlier run (AppCDS, -XX:SharedArchiveFile), and a dynamic archive
(-XX:ArchiveClassesAtExit) holds those of the app class path and of Spark's --jars alike.
`make setup` (or `python -m eos_ingest.spark.class_archive`) writes one by running a small job through
the same steps as a batch, with no broker; submit.job_conf then gives it to each local job.

The archive is keyed by what it was made from (the java binary, pyspark's version, the jar
names), so another JDK or jar set looks for another file. The JVM checks the archive itself as
well: one it cannot use (another JDK build or class path) is skipped with a one-line warning, and
the job runs as without it. Remote drivers (cluster masters) never get the option: the file is on
this machine only.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eos_ingest import paths
from eos_ingest.spark.session import (
    DELTA_CONF,
    LOCAL_CONF,
    local_driver_java_options,
    local_jars,
    spark_submit_binary,
    spark_submit_env,
)

TRAINING_SCRIPT = paths.TRAINING_SCRIPT  # spark/train_class_archive.py (shipped in the wheel)
BUILD_TIMEOUT_S = 600


def _java() -> Path | None:
    """The java that spark-submit starts: $JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_key() -> str | None:
    """What the archive depends on, hashed; None without java or the jars (no archive then)."""
    # Only where the archive is built or used: this module is on the DAG parse's path.
    import pyspark  # noqa: PLC0415 out of DAG parsing and the CLI's JVM-free commands

    java = _java()
    try:
        jars = [Path(j).name for j in local_jars()]
    except FileNotFoundError:
        return None
    if java is None:
        return None
    made_from = [str(java), str(java.stat().st_mtime_ns), pyspark.__version__, *jars]
    return hashlib.sha256("\n".join(made_from).encode()).hexdigest()[:16]


def archive_file(key: str) -> Path:
    return paths.state_dir() / "jvm" / f"driver-{key}.jsa"


def java_options() -> str | None:
    """The driver's JVM option that maps the archive, or None when there is none for this JDK
    and these jars (the job then starts as it always did)."""
    key = archive_key()
    if key is None or not archive_file(key).is_file():
        return None
    return archive_option(archive_file(key))


def archive_option(archive: Path) -> str:
    """The JVM option that maps `archive`, quoted for Spark, which splits an extraJavaOptions
    string as a shell would."""
    path = str(archive)
    if any(c.isspace() or c in "\"'\\" for c in path):
        path = '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"-XX:SharedArchiveFile={path}"


def build(force: bool = False) -> Path | None:
    """Write this machine's archive (a no-op when it exists, unless `force`); None without java
    or the jars. Older archives (other keys) are removed: each is ~200 MB."""

    key = archive_key()
    if key is None:
        return None
    target = archive_file(key)
    if target.is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    argv = [
        spark_submit_binary(),
        "--master",
        "local[2]",
        "--driver-java-options",
        f"{local_driver_java_options()} -XX:ArchiveClassesAtExit={partial}".strip(),
        "--jars",
        ",".join(local_jars()),
    ]
    for name, value in {**DELTA_CONF, **LOCAL_CONF, "spark.log.level": "WARN"}.items():
        argv += ["--conf", f"{name}={value}"]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="eos-class-archive-") as work:
        argv += [str(TRAINING_SCRIPT), work]
        try:
            done = subprocess.run(
                argv, env=spark_submit_env(), capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:  # run() has killed it
            partial.unlink(missing_ok=True)
            raise RuntimeError(
                f"the class-data archive's training job ran past {BUILD_TIMEOUT_S} s (it takes ~40 s "
                "on a quiet 2-core machine) and was stopped; jobs run without the archive. Write it "
                "later with: python -m eos_ingest.spark.class_archive"
            ) from None
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise RuntimeError(
            f"the class-data archive's training job failed (exit {done.returncode}); jobs run "
            f"without the archive. Its output:\n{done.stdout[-2000:]}{done.stderr[-4000:]}"
        )
    partial.replace(target)
    for old in target.parent.glob("driver-*.jsa"):
        if old != target:
            old.unlink(missing_ok=True)
    print(
        f"class-data archive for the job's driver JVM: {target} "
        f"({target.stat().st_size / 1e6:.0f} MB, {time.monotonic() - started:.0f} s)",
        file=sys.stderr,
    )
    return target


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--force", action="store_true", help="write it again even if it exists")
    args = parser.parse_args()
    try:
        built = build(force=args.force)
    except RuntimeError as exc:  # the reason and the way out, without a traceback
        sys.exit(f"class_archive: {exc}")
    if built is None:
        print("no java or no Spark jars (run 'make setup'): no class-data archive", file=sys.stderr)


if __name__ == "__main__":
    main()

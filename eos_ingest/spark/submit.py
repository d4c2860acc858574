"""How a batch reaches Spark: the spark-submit command line, shared by the CLI and the DAGs."""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import eos_ingest
from eos_ingest import paths
from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.errors import ConfigError
from eos_ingest.spark import class_archive
from eos_ingest.spark.session import (
    DELTA_CONF,
    LOCAL_CONF,
    local_driver_java_options,
    local_jars,
    spark_submit_binary,
)
from eos_ingest.storage.object_stores import LOG_STORE_CONF

JOB_SCRIPT = paths.JOB_SCRIPT  # package data: an installed wheel carries it
# The driver's heap, whichever way the job is submitted (`eos-ingest run`, the DAGs' spark_ingest): on
# a local master the driver is the executor too, and the DAGs' job ran at spark-submit's default of 1g.
DRIVER_MEMORY = "2g"


def job_conf(master: str, *, object_storage: bool = False, job_records: int | None = None) -> dict[str, str]:
    """--conf settings of the job; local masters get the local niceties too, and a pipeline with
    s3a tables Delta's commit coordinator (its JDBC settings and the S3 access are set by the job
    itself, object_storage.configure_session: no secret on the command line)."""
    # WARN: Spark's INFO lines (over 1,000 per batch) would bury the job's own phase lines.
    conf = {**DELTA_CONF, "spark.log.level": "WARN"}
    if object_storage:
        conf.update(LOG_STORE_CONF)
    if master.startswith("local"):
        conf.update(LOCAL_CONF)
        options = local_driver_options(job_records)
        if options:  # the "none" profile and no archive: the JVM's own defaults
            conf["spark.driver.extraJavaOptions"] = options
    return conf


def local_driver_options(job_records: int | None = None) -> str:
    """The options of a driver JVM on this machine: the profile's (session.local_driver_java_options,
    by the records the job will read when known) and the mapping of `make setup`'s class-data
    archive (seconds of class loading per start; spark/class_archive.py), if there is one. Empty for
    the "none" profile without an archive."""
    profile = local_driver_java_options(job_records=job_records)
    return " ".join(o for o in (profile, class_archive.java_options()) if o)


def local_session_conf(job_records: int | None = None) -> dict[str, str]:
    """The driver settings of a session a command starts in its own process (verify, maintain):
    a job's options (its profile, by the records it reads when known; the class archive). The
    JVM's warnings (an archive it cannot map, say) go to stderr, not to the stdout that those
    commands print their JSON report on."""
    options = local_driver_options(job_records)
    if not options:
        return {}
    return {"spark.driver.extraJavaOptions": f"-Xlog:disable -Xlog:all=warning:stderr {options}"}


def package_zip(state_dir: Path | None = None, package: Path | None = None) -> Path:
    """The eos_ingest package as a zip for --py-files, built once per content.

    The name carries a hash of every file of the package (paths and bytes), so an edited package
    gets a new zip and an unchanged one reuses the old; written to a temporary name and renamed,
    so a concurrent submit never ships a half-written zip.
    """
    package = package or Path(eos_ingest.__file__).resolve().parent
    # Laid out as the wheel: a checkout's spark/ and expectations/ go in as the package's folders
    # they ship as (paths.SHIPPED_FOLDERS); a driver reads the default suite from there.
    roots = {"": package}
    for top, packaged in paths.SHIPPED_FOLDERS.items():
        if (package.parent / top).is_dir() and not (package / packaged).exists():
            roots[f"{packaged}/"] = package.parent / top
    files = sorted(
        (prefix + p.relative_to(root).as_posix(), p)
        for prefix, root in roots.items()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )
    digest = hashlib.sha256()
    for name, file in files:
        digest.update(name.encode() + b"\0" + file.read_bytes() + b"\0")
    folder = (state_dir or paths.state_dir()) / "py-files"
    target = folder / f"eos_ingest-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".eos_ingest-", suffix=".zip")
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, file in files:
                # A fixed timestamp: the same package gives the same bytes.
                info = zipfile.ZipInfo(f"eos_ingest/{name}", (1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, file.read_bytes())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the zip from a worker run by another user
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target


def job_args(config_path: Path, batch_id: int, until_caught_up: bool = False) -> list[str]:
    """The job's arguments: the pipeline file by its name, shipped with --files (see ship_args)."""
    return ["--config-file", config_path.name, "--batch-id", str(batch_id)] + (
        ["--until-caught-up"] if until_caught_up else []
    )


def shipped(config_path: Path) -> dict[str, str]:
    """What a submit ships besides the jars, as SparkSubmitOperator's keywords: py_files, the
    package zip; files, the pipeline YAML, which the job reads by its name (job_args).

    The YAML goes as it is, ${VAR} and all: the job expands it on the driver, as before. Its text
    never reaches the command line, only its path on the submitting machine. An Avro pipeline's
    .avsc files go with it, and the suite file it names (expectations_suite); the job finds them
    beside the YAML (config/value.py's _schema_path, config/expectation_suites.py's suite_file).
    """
    files = [Path(config_path).resolve(), *avro_schema_files(config_path), *suite_files(config_path)]
    return {"py_files": str(package_zip()), "files": ",".join(str(f) for f in files)}


def suite_files(config_path: Path) -> list[Path]:
    """The suite file a pipeline names (`expectations_suite`), if any."""
    try:
        suite = load_pipeline(config_path).expectations_suite
    except ConfigError:
        return []  # the job loads the file again and reports what is wrong with it
    return [suite] if suite is not None else []


def avro_schema_files(config_path: Path) -> list[Path]:
    """The schema files an Avro pipeline reads; they are shipped flat, so two of one name clash."""
    try:
        config = load_pipeline(config_path)
        files = list(dict.fromkeys((*config.value.schema_files, *config.metadata.key_schema_files)))
    except ConfigError:
        return []  # the job loads the file again and reports what is wrong with it
    names = [f.name for f in files]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ConfigError(
            f"{config_path}: schema files {', '.join(clash)} have the same name in different folders; "
            "spark-submit ships files by name, so rename one"
        )
    return files


def ship_args(config_path: Path) -> list[str]:
    """shipped() as spark-submit arguments: --py-files and --files."""
    files = shipped(config_path)
    return ["--py-files", files["py_files"], "--files", files["files"]]


def app_name(config_path: Path, batch_id: int) -> str:
    return f"eos-ingest {Path(config_path).stem} batch {batch_id}"


def spark_submit_argv(
    config_path: Path,
    batch_id: int,
    master: str = "local[*]",
    driver_memory: str = DRIVER_MEMORY,
    *,
    until_caught_up: bool = False,
    object_storage: bool = False,
    iceberg: bool = False,
    job_records: int | None = None,
) -> list[str]:
    """The full spark-submit command that runs one batch (and, with until_caught_up, the next ones);
    job_records, the records it will read when known, picks the driver's JVM profile."""
    argv = [
        spark_submit_binary(),
        "--master",
        master,
        "--name",
        app_name(config_path, batch_id),
        "--driver-memory",
        driver_memory,
        "--jars",
        ",".join(local_jars(object_storage=object_storage, iceberg=iceberg)),
        *ship_args(config_path),
    ]
    for key, value in job_conf(master, object_storage=object_storage, job_records=job_records).items():
        argv += ["--conf", f"{key}={value}"]
    return [*argv, str(JOB_SCRIPT), *job_args(config_path, batch_id, until_caught_up)]

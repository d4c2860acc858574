"""The body of the spark-submit job: one Spark session for one batch, or for a catch-up's batches.

Each batch runs the whole sequence of batch/sequence.py on its own; kept in the package so it is
tested like the rest. The gate is QualityGate's; a benchmark's own job script passes another
GateStep to main (bench/ungated.py)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark import SparkFiles
from pyspark.sql import SparkSession

from eos_ingest.batch.gate_step import GateStep, QualityGate
from eos_ingest.batch.result import BatchResult
from eos_ingest.batch.sequence import run_fenced
from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.connections import registry as registry_conn
from eos_ingest.connections.kafka import KAFKA_SETTINGS_ENV, with_kafka_overrides
from eos_ingest.control.store import BatchStatus, ControlStore
from eos_ingest.errors import ConfigError, EosIngestError, FencedError, exit_code
from eos_ingest.service.operations import catch_up_target, caught_up, plan_batch
from eos_ingest.storage.object_stores import configure_session

log = logging.getLogger(__name__)


def check_file_name(name: str | None) -> str:
    """A --config-file value must be a plain file name: Spark ships a file under its name alone."""
    if not name or Path(name).name != name or name in (".", ".."):
        raise ConfigError(
            f"--config-file {name!r} is not a file name; pass the name of the pipeline YAML shipped "
            "with --files (e.g. --files /path/orders.yaml --config-file orders.yaml), or --config <path>"
        )
    return name


def shipped_file(name: str) -> Path:
    """The path on the driver of a file that spark-submit shipped with --files, by its name.

    Spark copies every --files file into the driver's SparkFiles folder at session start, in client
    and cluster mode alike; so a job started anywhere finds its pipeline file by name.
    """
    path = Path(SparkFiles.get(check_file_name(name)))
    if not path.is_file():
        raise ConfigError(
            f"--config-file {name!r}: no such file among the files shipped with spark-submit "
            f"(looked in {path.parent}); pass the pipeline YAML with --files"
        )
    return path


def run_job(
    config_path: Path | None,
    batch_id: int,
    *,
    until_caught_up: bool = False,
    config_file: str | None = None,
    gate: GateStep | None = None,
) -> list[BatchResult]:
    """Execute a planned batch; with until_caught_up, then plan and execute the next ones.

    The pipeline file is config_path (a path on the driver) or config_file (the name of a file
    shipped with --files). One Spark session serves every batch of the run, but each batch is
    still planned, fenced, gated, written and committed on its own, so a kill loses at most the
    batch in flight. The run ends when every partition has committed up to the last stable
    offsets read when the run starts (records produced later are the next run's), or when a plan
    finds nothing new. `gate`: QualityGate unless given.
    """
    gate = gate or QualityGate()
    gate.preload()  # beside the session's start, not beside the read
    # A shipped file is on the driver only once the session has started; a path is read first,
    # so a bad file or another pipeline's batch is refused before Spark starts.
    if config_path is None:
        check_file_name(config_file)  # before Spark starts
    spark = SparkSession.builder.getOrCreate() if config_path is None else None
    try:
        path = config_path if config_path is not None else shipped_file(str(config_file))
        # Kafka settings of the Airflow connection come in the environment, never on the command line.
        config = with_kafka_overrides(load_pipeline(path), os.environ.get(KAFKA_SETTINGS_ENV))
        config = registry_conn.with_connection(config, os.environ)  # value.schema_registry.conn_id
        store = ControlStore(config.control_db_url)
        store.ensure_schema()
        first = store.get_pipeline_batch(config.name, batch_id)  # never write another pipeline's ranges
        if spark is None:
            spark = SparkSession.builder.appName(f"eos-ingest {config.name} batch {batch_id}").getOrCreate()
        # s3a tables: access and the commit coordinator's JDBC settings, before any table is touched.
        configure_session(spark, config)
        target = catch_up_target(config) if until_caught_up else {}
        # A catch-up retried after its first batch committed goes on with the next ones.
        resumed = until_caught_up and first.status is not BatchStatus.PLANNED
        results = [] if resumed else [run_fenced(spark, config, store, first, gate)]
        if until_caught_up:
            while not caught_up(store.committed_offsets(config.name), target):
                log.info("pipeline %s: phase %s", config.name, "plan")
                batch, created = plan_batch(config, store, airflow_run_id=first.airflow_run_id)
                if batch is None:
                    break
                log.info("%s batch %s", "planned" if created else "resuming", batch.batch_id)
                results.append(run_fenced(spark, config, store, batch, gate))
    finally:
        if spark is not None:
            spark.stop()
    return results


def main(argv: Sequence[str] | None = None, gate: GateStep | None = None) -> int:
    """The spark-submit job: run a planned batch (and, with --until-caught-up, the next ones);
    exit codes as errors.exit_code."""
    # `gate` (QualityGate unless given) is not a command-line option: only a job script that
    # wraps this one passes another (bench/ungated.py), so no setting turns the gate off.
    parser = argparse.ArgumentParser(prog="ingest_batch.py", description=main.__doc__)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", type=Path, help="pipeline YAML file, a path on the driver")
    where.add_argument(
        "--config-file",
        help="name of the pipeline YAML shipped with spark-submit --files (any master, any deploy mode)",
    )
    parser.add_argument("--batch-id", required=True, type=int, help="planned batch to execute")
    parser.add_argument(
        "--until-caught-up",
        nargs="?",
        const="true",
        default="false",
        choices=("true", "false", "True", "False"),
        help="then plan and run the next batches in this Spark session until caught up "
        "(a value, true or false, lets a template pass the choice)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run_job(
            args.config,
            args.batch_id,
            until_caught_up=args.until_caught_up.lower() == "true",
            config_file=args.config_file,
            gate=gate,
        )
    except FencedError as exc:
        print(f"eos-ingest: fenced: {exc}", file=sys.stderr)
        return exit_code(exc)
    except EosIngestError as exc:
        print(f"eos-ingest: {type(exc).__name__}: {exc}", file=sys.stderr)
        return exit_code(exc)
    return 0

"""eos-ingest: plan | run | status | check-lag | verify | maintain | backfill | abandon, for one pipeline, without Airflow.

eos-ingest run --pipeline demo        plan a batch (or resume the pending one) and execute it
eos-ingest run --pipeline demo --until-caught-up
                                      then the next batches, in one Spark session, until caught up
eos-ingest backfill --pipeline demo --resume 12
                                      run the planned backfill 12 again (its job was killed)
eos-ingest check-lag --pipeline demo  the lag against the pipeline's alerts: limits (exit 4 when passed)
eos-ingest verify --pipeline demo     compare Kafka's committed records with the output tables
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from eos_ingest.config.pipeline import PipelineConfig, load_pipeline, load_pipeline_by_name
from eos_ingest.connections import aws as aws_conn
from eos_ingest.connections.kafka import (
    config_for_cli,
)
from eos_ingest.control.store import ControlStore
from eos_ingest.errors import EXIT_LAG_LIMIT, ConfigError, EosIngestError, exit_code
from eos_ingest.kafka.offsets import fetch_snapshot
from eos_ingest.service.backfill import PARAM_KEYS, resumable_backfill
from eos_ingest.service.operations import (
    abandon_batch,
    audit_batches,
    batch_summary,
    check_lag,
    clean_dead_attempts,
    maintain,
    open_store,
    pipeline_status,
    plan_batch,
    record_backfill,
    submit_batch,
)
from eos_ingest.spark.session import build_session
from eos_ingest.spark.submit import local_session_conf
from eos_ingest.storage.object_stores import configure_session, uses_object_store
from eos_ingest.storage.table_formats import uses_iceberg

log = logging.getLogger(__name__)

# Log level of the CLI itself (default WARNING); INFO shows the phase lines a harness can follow.
LOG_LEVEL_ENV = "EOS_LOG_LEVEL"


def load_config(args: argparse.Namespace) -> PipelineConfig:
    """The pipeline's config with its Kafka connection (``AIRFLOW_CONN_<ID>``) joined as in Airflow."""
    config = load_pipeline(args.config) if args.config else load_pipeline_by_name(args.pipeline)
    # An aws connection's access joins this process's AWS_* variables, which the table readers
    # and the spark-submit job (it inherits the environment) take it from.
    aws_conn.apply(config.aws_conn_id, aws_conn.connection_from_env(config.aws_conn_id, os.environ))
    return config_for_cli(config)[0]


def cmd_plan(args: argparse.Namespace) -> int:
    config = load_config(args)
    batch, created = plan_batch(config, open_store(config), allow_data_loss=args.allow_data_loss)
    if batch is None:
        print(json.dumps({"pipeline": config.name, "batch": None, "message": "nothing new to ingest"}))
    else:
        print(
            json.dumps({"pipeline": config.name, "created": created, "batch": batch_summary(batch)}, indent=2)
        )
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    config = load_config(args)
    log.info("pipeline %s: phase %s", config.name, "plan")
    store = open_store(config)
    batch, created = plan_batch(config, store, allow_data_loss=args.allow_data_loss)
    if batch is None:
        print(json.dumps({"pipeline": config.name, "batch": None, "message": "nothing new to ingest"}))
        return 0
    print(f"eos-ingest: {'planned' if created else 'resuming'} batch {batch.batch_id}", file=sys.stderr)
    log.info("batch %s: phase %s", batch.batch_id, "submit")
    return submit_and_report(config, store, batch.batch_id, args.master, until_caught_up=args.until_caught_up)


def submit_and_report(
    config: PipelineConfig, store: ControlStore, batch_id: int, master: str, *, until_caught_up: bool = False
) -> int:
    """spark-submit one batch, print its summary as JSON; 0 only when it committed.

    With until_caught_up the summary lists every scheduled batch of the run from this one on, and
    0 means all of them committed."""
    code, ran = submit_batch(config, store, batch_id, master, until_caught_up=until_caught_up)
    if until_caught_up:
        print(json.dumps({"pipeline": config.name, "batches": [batch_summary(b) for b in ran]}, indent=2))
    else:
        print(json.dumps(batch_summary(ran[0]), indent=2))
    all_committed = all(b.status.value == "committed" for b in ran)
    return 0 if code == 0 and all_committed else (code or 1)


def cmd_backfill(args: argparse.Namespace) -> int:
    """``eos-ingest backfill``: check, record the batch, then run it with spark-submit; with
    ``--resume N``, run the planned backfill N again under a new fence (after a killed job)."""
    given = [f"--{k.replace('_', '-')}" for k in PARAM_KEYS if getattr(args, k) is not None]
    if args.resume is not None and given:
        raise ConfigError(
            f"--resume {args.resume} runs the recorded backfill's own ranges again and takes no "
            f"{', '.join(given)}; leave those out, or leave out --resume to record a new backfill"
        )
    if args.resume is None and not all(getattr(args, k) for k in ("topic", "partitions", "reason")):
        raise ConfigError(
            "a new backfill needs --topic, --partitions, a range (--start-offset/--end-offset or "
            "--start-time/--end-time) and --reason; or --resume N runs the planned backfill N again"
        )
    config = load_config(args)
    store = open_store(config)
    if args.resume is not None:
        batch = resumable_backfill(config, store, args.resume)
        print(f"eos-ingest: resuming backfill batch {batch.batch_id}: {batch.override_note}", file=sys.stderr)
        code = submit_and_report(config, store, batch.batch_id, args.master)
        for table, paths in clean_dead_attempts(config, store, batch.batch_id).items():
            if paths:
                print(f"eos-ingest: deleted {len(paths)} files the killed attempts staged in the {table}",
                      file=sys.stderr)  # fmt: skip
        return code
    batch, request = record_backfill(config, store, {k: getattr(args, k) for k in PARAM_KEYS})
    print(f"eos-ingest: backfill batch {batch.batch_id}: {request.describe()}", file=sys.stderr)
    return submit_and_report(config, store, batch.batch_id, args.master)


def cmd_audit(args: argparse.Namespace) -> int:
    """``eos-ingest audit``: GX over a committed batch's rows; prints the report; 1 if it failed."""
    config = load_config(args)
    (report,) = audit_batches(config, [args.batch_id], recount=args.recount, audit_process=True)
    print(json.dumps(report, indent=2, default=str))
    return 0 if report["success"] else 1


def cmd_status(args: argparse.Namespace) -> int:
    """operations.pipeline_status as JSON: the lag and notes the Ingestion page shows (exit 75
    when the broker does not answer)."""
    config = load_config(args)
    shown = pipeline_status(config, open_store(config), batches=args.limit)
    print(json.dumps(shown, indent=2))
    return 0


def cmd_check_lag(args: argparse.Namespace) -> int:
    """``eos-ingest check-lag``: the lag figures against the limits as JSON; exit 4
    (EXIT_LAG_LIMIT) when one is passed, 75 when the figures could not be read."""
    config = load_config(args)
    result = check_lag(
        config, open_store(config), max_lag_records=args.max_lag_records, max_lag_seconds=args.max_lag_seconds
    )
    print(json.dumps(result.to_dict(), indent=2))
    if result.failed:
        print(f"eos-ingest: {result.message()}", file=sys.stderr)
        return EXIT_LAG_LIMIT
    return 0


@contextmanager
def spark_session(config: PipelineConfig, purpose: str, store: ControlStore) -> Iterator[Any]:
    """A Spark session for a command that runs Spark in this process (verify, maintain). A session
    it builds gets the driver JVM profile of a job that reads the pipeline's committed ranges (their
    offsets: an upper bound of the records, which transaction markers and compaction only lower).

    Called in a process that already has a session (a test, a notebook), it borrows it and
    leaves it running: stopping it would break its owner's next Spark step."""
    # pyspark is imported here, not at the top: the CLI's other commands never load it.
    from pyspark.sql import SparkSession  # noqa: PLC0415 JVM-free: the other commands never load pyspark

    borrowed = SparkSession.getActiveSession()
    if borrowed is None:
        committed = sum(r.range.end - r.range.start for r in store.range_records(config.name) if r.committed)
        spark = build_session(
            f"eos-ingest {purpose} {config.name}",
            master="local[2]",
            extra=local_session_conf(committed),
            object_storage=uses_object_store(config),
            iceberg=uses_iceberg(config),
        )
        spark.sparkContext.setLogLevel("ERROR")
    else:
        spark = borrowed
    try:
        configure_session(spark, config)
        yield spark
    finally:
        if borrowed is None:
            spark.stop()


def cmd_verify(args: argparse.Namespace) -> int:
    # verify's module imports pyspark and kafka-python, which the CLI's other commands never load.
    from eos_ingest.service.verify import verify_pipeline  # noqa: PLC0415 JVM-free: the other commands

    config = load_config(args)
    store = open_store(config)
    with spark_session(config, "verify", store) as spark:
        report = verify_pipeline(spark, config, store.range_records(config.name))
    print(json.dumps({"pipeline": config.name, **report.to_dict()}, indent=2))
    return 0 if report.ok else 1


def cmd_maintain(args: argparse.Namespace) -> int:
    """``eos-ingest maintain``: OPTIMIZE and VACUUM the table and the quarantine table (a dry run
    only lists what VACUUM would delete, without Spark)."""
    config = load_config(args)
    store = open_store(config)
    retention = args.retention_hours
    if retention is None and config.maintenance is not None:
        retention = config.maintenance.retention_hours
    if args.dry_run:
        report = maintain(config, store, None, retention_hours=retention, dry_run=True)
    else:
        with spark_session(config, "maintain", store) as spark:
            report = maintain(config, store, spark, retention_hours=retention)
    print(json.dumps(report, indent=2, default=str))
    return 0


def cmd_reset_offsets(args: argparse.Namespace) -> int:
    """Operator action after a topic was deleted and recreated: restart its committed offsets.

    Rows already in the table at the same offsets came from the old topic; the next batches
    replace them range by range as the new topic's records land. The topic's current id and
    cluster id are recorded in the same transaction, so the next plans accept it.
    """
    config = load_config(args)
    if args.topic not in config.topics:
        raise ConfigError(f"topic {args.topic!r} is not one of the pipeline's topics {list(config.topics)}")
    snapshot = fetch_snapshot(config.kafka_settings, [args.topic])
    chosen = _partitions(args.partitions, args.topic, [o.partition for o in snapshot.offsets])
    to = {
        o.partition: (o.log_start if args.to == "earliest" else o.last_stable)
        for o in snapshot.offsets
        if chosen is None or o.partition in chosen
    }
    store = open_store(config)
    before = store.reset_offsets(
        config.name, args.topic, to, args.reason, identity=snapshot.identity, whole_topic=chosen is None
    )
    ident = snapshot.identity.of(args.topic)
    print(
        json.dumps(
            {
                "pipeline": config.name, "topic": args.topic, "before": before, "after": to,
                "topic_id": ident.topic_id, "cluster_id": ident.cluster_id,
            }
        )
    )  # fmt: skip
    return 0


def _partitions(text: str | None, topic: str, existing: Sequence[int]) -> set[int] | None:
    """--partitions "0,2" as a set (None: all); ConfigError for a bad or unknown partition."""
    if text is None:
        return None
    try:
        chosen = {int(p) for p in text.split(",") if p.strip()}
    except ValueError:
        chosen = set()
    if not chosen:
        raise ConfigError(f"--partitions {text!r} is not a comma-separated list of partitions; e.g. 0,2")
    unknown = sorted(chosen - set(existing))
    if unknown:
        raise ConfigError(
            f"--partitions {text!r}: topic {topic!r} has no partition {', '.join(map(str, unknown))} "
            f"(it has {', '.join(map(str, sorted(existing)))}); pass existing partitions or leave the option out"
        )
    return chosen


def cmd_abandon(args: argparse.Namespace) -> int:
    config = load_config(args)
    print(json.dumps(abandon_batch(config, open_store(config), args.batch_id, args.reason)))
    return 0


def _at_least_one(text: str) -> int:
    """A lag limit option: a whole number >= 1, as in the file."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eos-ingest", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, func, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        which = p.add_mutually_exclusive_group(required=True)
        which.add_argument("--pipeline", help="pipeline name (pipelines/<name>.yaml)")
        which.add_argument("--config", type=Path, help="path of a pipeline YAML file")
        p.set_defaults(func=func)
        return p

    for name, func, text in (
        ("plan", cmd_plan, "plan the next batch"),
        ("run", cmd_run, "plan and execute a batch"),
    ):
        p = command(name, func, text)
        p.add_argument(
            "--allow-data-loss",
            action="store_true",
            help="skip offsets lost to retention (recorded on the batch); refused without it",
        )
        if name == "run":
            p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
            p.add_argument(
                "--until-caught-up",
                action="store_true",
                help="run batch after batch in one Spark session until every partition has "
                "committed up to the last stable offsets of the start (each batch commits on its own)",
            )
    command("status", cmd_status, "offsets, lag and recent batches").add_argument(
        "--limit", type=int, default=10
    )
    p = command(
        "check-lag", cmd_check_lag, "check the lag against the alerts: limits (exit 4 when one is passed)"
    )
    p.add_argument(
        "--max-lag-records", type=_at_least_one, help="replaces alerts.max_lag_records of the file"
    )
    p.add_argument(
        "--max-lag-seconds", type=_at_least_one, help="replaces alerts.max_lag_seconds of the file"
    )
    command("verify", cmd_verify, "compare Kafka's committed records with the output tables")
    p = command("maintain", cmd_maintain, "OPTIMIZE and VACUUM the output tables")
    p.add_argument(
        "--retention-hours",
        type=float,
        help="VACUUM keeps files removed less than this long ago (default: the pipeline's "
        "maintenance.retention_hours, else 168; refused below what a planned batch may still need)",
    )
    p.add_argument("--dry-run", action="store_true", help="change nothing: list what VACUUM would delete now")
    p = command("backfill", cmd_backfill, "re-ingest an offset range or time window of committed partitions")
    p.add_argument("--topic", help="the topic to backfill (a new backfill)")
    p.add_argument("--partitions", help="comma-separated, e.g. 0,1")
    p.add_argument("--start-offset", type=int, help="first offset (inclusive)")
    p.add_argument("--end-offset", type=int, help="end offset (exclusive)")
    p.add_argument("--start-time", help="ISO-8601, e.g. 2026-11-22T10:00:00Z (inclusive)")
    p.add_argument("--end-time", help="ISO-8601 (exclusive)")
    p.add_argument("--reason", help="why; kept on the batch")
    p.add_argument(
        "--resume",
        type=int,
        metavar="BATCH_ID",
        help="run the planned backfill BATCH_ID again under a new fence (a killed job's; "
        "`status` lists them under stale_batches), instead of recording a new one",
    )
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p = command("audit", cmd_audit, "check a committed batch's rows with Great Expectations (Data Docs page)")
    p.add_argument("--batch-id", type=int, required=True, help="a committed batch of the pipeline")
    p.add_argument(
        "--recount",
        action="store_true",
        help="count the batch's records in Kafka again (default: the gate's count, made before the commit)",
    )
    p = command("reset-offsets", cmd_reset_offsets, "restart a recreated topic's offsets (operator action)")
    p.add_argument("--topic", required=True)
    p.add_argument(
        "--to", choices=("earliest", "latest"), required=True, help="the topic's log start or its LSO"
    )
    p.add_argument(
        "--partitions", help="comma-separated partitions to reset, e.g. 0,2 (default: every partition)"
    )
    p.add_argument("--reason", required=True)
    p = command("abandon", cmd_abandon, "give up a planned batch (operator action)")
    p.add_argument("--batch-id", type=int, required=True)
    p.add_argument("--reason", required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    level = os.environ.get(LOG_LEVEL_ENV, "WARNING").upper()
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except EosIngestError as exc:
        print(f"eos-ingest: {type(exc).__name__}: {exc}", file=sys.stderr)
        return exit_code(exc)


def console_main() -> NoReturn:
    """The `eos-ingest` command: main(), then an exit that skips the interpreter's last collections.

    A command that imported GX (audit, run) leaves a heap of a few million objects, and the
    interpreter's shutdown spent ~0.9 s of CPU collecting them (measured on the audit of a
    950k-row batch: 4.1 -> 3.2 s of CPU for the whole process). gc.freeze() moves every object to
    the permanent generation, which those collections skip; atexit handlers (logging's flush,
    Spark's shutdown) still run, and the memory goes back with the process. Tests call main(), so
    their process keeps collecting."""
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    console_main()

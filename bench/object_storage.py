"""Benchmark of s3a tables (docs/object-storage.md): what the commit coordinator costs, and one
batch on a local table against an s3a table. Run by hand, from the repository root:

    nice -n 19 .venv/bin/python -m bench.object_storage [--commits 20] [--records 100000] [--runs 3]

It starts what it needs on free 127.0.0.1 ports and stops it after: a Kafka broker (stack/stack.sh),
the S3 API server (stack/s3.sh: s3proxy, filesystem provider) and the tests' PostgreSQL
(scripts/postgres.sh, left running if it was up; a fresh database per run).

1. Cost per commit: two Spark applications (bench/object_storage_commits_app.py) each make
   `--commits` Delta commits of one small file to a new s3a table and time only the log commit:
   one with Delta's default s3a log store, one with the control DB as the coordinator
   (JdbcLogStore). Median milliseconds of each, and their difference.
2. Commits that race (`--race-rounds`, 0 skips it): two Spark applications
   (bench/object_storage_race_app.py) add a row each to one s3a table per round, committing at the
   same instant. Without the coordinator they run until a round where both got the same version
   (one commit vanished though both saw success), up to `--race-rounds`; then as many rounds with
   the coordinator. The commits lost in each arm, found by reading the table with delta-rs.
3. One batch: `--records` records (bench.workload: ~200 B JSON values, 6 partitions, 5% in aborted
   transactions), then `eos-ingest run` of the whole topic as one batch into a new pipeline on a
   local table and on an s3a table, alternately, `--runs` times each; median wall seconds.

Appends one JSON line to bench/results/object_storage.jsonl and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import yaml
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bench.chaos.procs import free_ports
from bench.workload import SCHEMA, produce
from eos_ingest import paths
from eos_ingest.spark.session import DELTA_CONF, LOCAL_CONF, local_jars, spark_submit_binary, spark_submit_env
from eos_ingest.storage.object_stores import LOG_STORE_CONF, S3Access, delta_rs_uri

RESULTS = paths.REPO_ROOT / "bench" / "results" / "object_storage.jsonl"
COMMITS_APP = paths.REPO_ROOT / "bench" / "object_storage_commits_app.py"
RACE_APP = paths.REPO_ROOT / "bench" / "object_storage_race_app.py"
CLI = str(Path(sys.executable).with_name("eos-ingest"))


def script(path: str, command: str, env: dict[str, str]) -> str:
    done = subprocess.run([str(paths.REPO_ROOT / path), command], env=env, text=True, capture_output=True,
                          timeout=600, check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{path} {command} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout.strip()


@contextmanager
def services(work: Path) -> Iterator[tuple[str, dict[str, str], str]]:
    """(Kafka bootstrap, the AWS_* variables of the S3 server, a PostgreSQL server URL)."""
    kafka_port, controller_port, s3_port = free_ports(3)
    kafka = {**os.environ, "KAFKA_PORT": str(kafka_port), "KAFKA_CONTROLLER_PORT": str(controller_port),
             "KAFKA_HOME_DIR": str(work / "kafka")}  # fmt: skip
    s3 = {**os.environ, "S3_PORT": str(s3_port), "S3_DIR": str(work / "s3"), "S3_ACCESS_KEY": "bench",
          "S3_SECRET_KEY": uuid.uuid4().hex}  # fmt: skip
    pg_was_up = subprocess.run([str(paths.REPO_ROOT / "scripts/postgres.sh"), "status"],
                               capture_output=True, check=False).returncode == 0  # fmt: skip
    started: list[tuple[str, dict[str, str]]] = []
    try:
        script("stack/stack.sh", "up", kafka)
        started.append(("stack/stack.sh", kafka))
        script("stack/s3.sh", "up", s3)
        started.append(("stack/s3.sh", s3))
        if not pg_was_up:
            script("scripts/postgres.sh", "up", dict(os.environ))
            started.append(("scripts/postgres.sh", dict(os.environ)))
        aws = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{s3['S3_PORT']}",
            "AWS_ACCESS_KEY_ID": s3["S3_ACCESS_KEY"],
            "AWS_SECRET_ACCESS_KEY": s3["S3_SECRET_KEY"],
            "AWS_REGION": "us-east-1",
        }
        yield f"127.0.0.1:{kafka['KAFKA_PORT']}", aws, script("scripts/postgres.sh", "url", dict(os.environ))
    finally:
        for path, env in reversed(started):
            subprocess.run([str(paths.REPO_ROOT / path), "down"], env=env, capture_output=True, check=False)


def new_database(server_url: str) -> str:
    server = make_url(server_url)
    name = f"eos_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return server.set(database=name).render_as_string(hide_password=False)


def new_bucket(aws: dict[str, str]) -> str:
    from pyarrow.fs import S3FileSystem

    fs = S3FileSystem(access_key=aws["AWS_ACCESS_KEY_ID"], secret_key=aws["AWS_SECRET_ACCESS_KEY"],
                      endpoint_override=aws["AWS_ENDPOINT_URL"], scheme="http", region="us-east-1",
                      allow_bucket_creation=True)  # fmt: skip
    name = f"bench-{uuid.uuid4().hex[:10]}"
    fs.create_dir(name)
    return name


def commit_times(aws: dict[str, str], db_url: str, commits: int, coordinator: bool, log: Path) -> list[float]:
    table = f"s3a://{new_bucket(aws)}/commits"
    argv = [spark_submit_binary(), "--master", "local[1]", "--driver-memory", "512m",
            "--jars", ",".join(local_jars(object_storage=True))]  # fmt: skip
    conf = {**DELTA_CONF, **LOCAL_CONF, "spark.log.level": "WARN", **(LOG_STORE_CONF if coordinator else {})}
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    env = {**spark_submit_env(), **aws, "EOS_BENCH_CONTROL_DB_URL": db_url}
    with log.open("w") as err:
        done = subprocess.run([*argv, str(COMMITS_APP), table, str(commits)], env=env, stdout=subprocess.PIPE,
                              stderr=err, text=True, timeout=3600, check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the commits app failed ({done.returncode}); see {log}")
    return list(json.loads(done.stdout.strip().splitlines()[-1])["commit_ms"])


def race(
    table: str,
    aws: dict[str, str],
    db_url: str,
    work: Path,
    coordinator: bool,
    rounds: int,
    driver_java_options: str = "",
) -> list[tuple[str, int]]:
    """The two race applications started together on the s3a `table`, up to `rounds` rounds each:
    the (writer, round) of every commit they reported as a success. Each must exit 0.
    driver_java_options (empty: the JVM's defaults, as the bench runs them) go to both drivers."""
    barrier = work / f"race-{uuid.uuid4().hex[:8]}"
    barrier.mkdir(parents=True)
    conf = {**DELTA_CONF, **LOCAL_CONF, "spark.log.level": "WARN", **(LOG_STORE_CONF if coordinator else {})}
    if driver_java_options:
        conf["spark.driver.extraJavaOptions"] = driver_java_options
    argv = [spark_submit_binary(), "--master", "local[1]", "--driver-memory", "512m",
            "--jars", ",".join(local_jars(object_storage=True))]  # fmt: skip
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    env = {**spark_submit_env(), **aws, "EOS_RACE_CONTROL_DB_URL": db_url}
    logs = {writer: barrier.with_name(f"{barrier.name}-{writer}.log") for writer in ("a", "b")}
    procs = {
        writer: subprocess.Popen(
            [*argv, str(RACE_APP), table, writer, str(rounds), str(barrier)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=log.open("w"),
            text=True,
        )
        for writer, log in logs.items()
    }
    claimed: list[tuple[str, int]] = []
    try:
        for writer, proc in procs.items():
            # Generous: a round is ~15-19 s on a quiet 2-core machine, several times that on a busy one.
            out, _ = proc.communicate(timeout=900 + 60 * rounds)
            if proc.returncode != 0:
                tail = logs[writer].read_text()[-3000:]
                raise RuntimeError(f"race writer {writer} exited {proc.returncode}:\n{out}\n{tail}")
            claimed += committed_rounds(out)
    finally:
        for proc in procs.values():  # a writer left waiting at a barrier for the other, or timed out
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return sorted(claimed)


def committed_rounds(output: str) -> list[tuple[str, int]]:
    """The (writer, round) of each `committed <writer> <round> version <v>` line of a race app."""
    return [
        (writer, int(round_))
        for line in output.splitlines()
        if line.startswith("committed ")
        for writer, round_ in [line.split()[1:3]]
    ]


def rows_in_table(table: str, aws: dict[str, str]) -> list[tuple[str, int]]:
    """The (writer, round) rows of a race's table, read by delta-rs (not by the code that wrote them)."""
    from deltalake import DeltaTable

    rows = DeltaTable(delta_rs_uri(table), storage_options=S3Access.from_env(aws).storage_options())
    data = rows.to_pyarrow_table().to_pydict()
    return sorted(zip(data["writer"], data["round"], strict=True))


def lost_commits(
    aws: dict[str, str], db_url: str, work: Path, coordinator: bool, rounds: int
) -> tuple[int, int]:
    """(rounds the race ran, commits reported as a success that the table does not hold)."""
    table = f"s3a://{new_bucket(aws)}/race"
    claimed = race(table, aws, db_url, work, coordinator, rounds)
    return len(claimed) // 2, len(set(claimed) - set(rows_in_table(table, aws)))


def one_batch(work: Path, name: str, bootstrap: str, topic: str, output: str, db_url: str,
              aws: dict[str, str]) -> float:  # fmt: skip
    doc = {
        "name": name, "topics": [topic], "kafka": {"bootstrap.servers": bootstrap}, "kafka_conn_id": None,
        "start_from": "earliest", "max_records_per_partition": 10_000_000,
        "value": {"format": "json", "schema": SCHEMA}, "output": {"path": output},
        "control_db_url": db_url, "schedule": None,
    }  # fmt: skip
    config = work / "pipelines" / f"{name}.yaml"
    config.parent.mkdir(exist_ok=True)
    config.write_text(yaml.safe_dump(doc))
    env = {**os.environ, **aws}
    started = time.monotonic()
    done = subprocess.run([CLI, "run", "--config", str(config), "--master", "local[2]"], env=env,
                          capture_output=True, text=True, timeout=3600, check=False)  # fmt: skip
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"eos-ingest run {name} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return round(seconds, 2)


def race_fields(raced: dict[str, tuple[int, int]]) -> dict[str, int | None]:
    """The race's rounds and lost commits per arm for the result (None for an arm not run)."""
    fields: dict[str, int | None] = {}
    for arm, suffix in (("without", "without_coordinator"), ("with", "with_coordinator")):
        rounds, lost = raced.get(arm) or (None, None)
        fields[f"race_rounds_{suffix}"] = rounds
        fields[f"race_commits_lost_{suffix}"] = lost
    return fields


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    args.add_argument("--commits", type=int, default=20)
    args.add_argument("--race-rounds", type=int, default=40, help="0: no race")
    args.add_argument("--records", type=int, default=100_000)
    args.add_argument("--runs", type=int, default=3)
    args.add_argument("--note", default="", help="how the machine was (kept with the results)")
    opts = args.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-s3a-"))
    load_before = os.getloadavg()[0]
    try:
        with services(work) as (bootstrap, aws, pg_url):
            without = commit_times(aws, new_database(pg_url), opts.commits, False, work / "without.log")
            with_coordinator = commit_times(aws, new_database(pg_url), opts.commits, True, work / "with.log")
            raced: dict[str, tuple[int, int]] = {}
            if opts.race_rounds:
                raced["without"] = lost_commits(aws, new_database(pg_url), work, False, opts.race_rounds)
                # As many rounds with the coordinator as the race without it took to show a loss.
                raced["with"] = lost_commits(
                    aws, new_database(pg_url), work, True, max(1, raced["without"][0])
                )
                print(f"race: {raced}", flush=True)
            workload = produce(bootstrap, f"bench-s3a-{uuid.uuid4().hex[:8]}", opts.records)
            batches: dict[str, list[float]] = {"local": [], "s3a": []}
            for run in range(opts.runs):
                order = ("local", "s3a") if run % 2 == 0 else ("s3a", "local")
                for kind in order:
                    output = str(work / "tables" / f"{kind}{run}") if kind == "local" else (
                        f"s3a://{new_bucket(aws)}/tables/{kind}{run}")  # fmt: skip
                    seconds = one_batch(work, f"bench_{kind}{run}", bootstrap, workload.topic, output,
                                        new_database(pg_url), aws)  # fmt: skip
                    batches[kind].append(seconds)
                    print(f"batch on {kind}: {seconds} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=paths.REPO_ROOT, text=True,
                            capture_output=True, check=False).stdout.strip()  # fmt: skip
    median_without, median_with = statistics.median(without), statistics.median(with_coordinator)
    result = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "note": opts.note,
        "cpus": os.cpu_count(),
        "load_1m_before": round(load_before, 2),
        "load_1m_after": round(os.getloadavg()[0], 2),
        "commits_per_arm": opts.commits,
        "commit_ms_median_without_coordinator": median_without,
        "commit_ms_median_with_coordinator": median_with,
        "coordinator_ms_per_commit": round(median_with - median_without, 1),
        "commit_ms_without": without,
        "commit_ms_with": with_coordinator,
        **race_fields(raced),
        "batch_records_produced": workload.records_produced,
        "batch_records_committed": workload.records_committed,
        "batch_runs": opts.runs,
        "batch_seconds_median_local": statistics.median(batches["local"]),
        "batch_seconds_median_s3a": statistics.median(batches["s3a"]),
        "batch_seconds_local": batches["local"],
        "batch_seconds_s3a": batches["s3a"],
    }
    with RESULTS.open("a") as out:
        out.write(json.dumps(result) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""A killed backfill is not planned forever: `eos-ingest backfill --resume N` runs it again under a
new fence, `abandon` gives it up and removes its branch, and `status` / `maintain` name it while it
waits (issue 48, item 6). Real broker, spark-submit jobs killed with SIGKILL, Delta and Iceberg."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest

from eos_ingest.batch.attempt import PAUSE_BEFORE_TABLE_COMMIT_ENV
from eos_ingest.cli import main as cli_main
from eos_ingest.service.operations import job_argv, open_store, record_backfill
from eos_ingest.spark.session import spark_submit_env
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from tests.fixtures.pipelines import ingest_once, on_cases, verify_pipeline
from tests.helpers.kafka import TxProducer
from tests.helpers.processes import wait_for_pause

pytestmark = pytest.mark.integration

# The bound past which a planned batch is named as stale (eos_ingest/service/stale_batches.py).
STALE_HOURS_ENV = "EOS_STALE_BATCH_HOURS"


def rows(start: int, count: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(start, start + count)]


def committed_pipeline(spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url):
    """A 2-partition topic of 40 committed records (one aborted transaction), ingested once."""
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, rows(0, 20), commit=True, partition=0)  # 0-19, marker 20
    producer.transaction(topic, rows(900, 5), commit=False, partition=0)  # 21-25 aborted, marker 26
    producer.transaction(topic, rows(20, 20), commit=True, partition=1)  # 0-19, marker 20
    config = make_pipeline([topic], control_db_url)
    assert ingest_once(spark, config) is not None
    return config, topic


def killed_backfill(config, topic: str, tmp_path: Path) -> int:
    """A backfill of [5, 20) of both partitions recorded as `eos-ingest backfill` records it, its
    spark-submit job SIGKILLed after the gate with the table's replace staged (not published)."""
    store = open_store(config)
    params = {"topic": topic, "partitions": "0,1", "start_offset": 5, "end_offset": 20, "reason": "replay"}
    batch, _ = record_backfill(config, store, params)
    env = spark_submit_env()
    pause, log = tmp_path / "pause", tmp_path / "job.log"
    env[PAUSE_BEFORE_TABLE_COMMIT_ENV] = str(pause)
    argv = job_argv(config, batch, "local[1]", driver_memory="1g")
    with log.open("w") as out:  # a session of its own: the JVM and the Python driver die as one group
        job = subprocess.Popen(argv, env=env, start_new_session=True, stdout=out, stderr=subprocess.STDOUT)
    wait_for_pause(job, pause, log)  # type: ignore[arg-type]
    os.killpg(job.pid, signal.SIGKILL)
    job.wait(timeout=30)
    killed = store.get_batch(batch.batch_id)
    assert killed.status.value == "planned" and killed.fence == 1, killed
    return batch.batch_id


def branches(config) -> list[str]:
    """The staged branches (eos_batch<id>_f<fence>) of the table and the quarantine table, read
    with pyiceberg (not the job's Spark session)."""
    catalog = IcebergCatalog.of(config).pyiceberg()
    found = []
    for name in config.output_tables:
        try:
            table = catalog.load_table(name)
        except Exception:  # the quarantine table is created by its first write
            continue
        found += [ref for ref in table.refs() if ref.startswith("eos_batch")]
    return sorted(found)


def identities(config) -> Counter[tuple[str, int, int]]:
    """(topic, partition, offset) of every row of the table, read with delta-rs or pyiceberg, apart
    from the project's own readers: a second copy counts 2."""
    if config.output.format == "iceberg":
        arrow = IcebergCatalog.of(config).pyiceberg().load_table(config.output.table).scan().to_arrow()
    else:
        from deltalake import DeltaTable

        arrow = DeltaTable(str(config.output_path)).to_pyarrow_table()
    columns = [arrow.column(c).to_pylist() for c in ("kafka_topic", "kafka_partition", "kafka_offset")]
    return Counter(zip(*columns, strict=True))


def dead_files(config, batch_id: int) -> list[str]:
    """Parquet files under the Delta table's folder that its current version does not name and
    that hold rows of `batch_id` only: what a killed attempt of that batch staged."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    root = Path(config.output_path)
    named = {unquote(p) for p in pa.table(DeltaTable(str(root)).get_add_actions()).column("path").to_pylist()}
    found = []
    for path in sorted(root.rglob("*.parquet")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith("_delta_log/") or relative in named:
            continue
        if set(pq.read_table(path, columns=["batch_id"]).column("batch_id").to_pylist()) == {batch_id}:
            found.append(relative)
    return found


def cli_process(argv: list[str], timeout_s: float = 600) -> tuple[int, dict, str]:
    """`eos-ingest <argv>` in a process (and session) of its own, as a user runs it, bounded: past
    `timeout_s` it and its spark-submit job are killed and the test fails."""
    job = subprocess.Popen(
        [sys.executable, "-m", "eos_ingest.cli", *argv],
        start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        out, err = job.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.communicate()
        pytest.fail(f"eos-ingest {' '.join(argv)} did not end within {timeout_s} s")
    return job.returncode, (json.loads(out) if out.strip().startswith("{") else {}), err


def cli_json(capture, argv: list[str]) -> tuple[int, dict, str]:
    """The command's exit code, its stdout as JSON and its stderr (capfd: `run` and `backfill`
    hand the spark-submit job this process's stderr, a file descriptor)."""
    capture.readouterr()
    code = cli_main(argv)
    out, err = capture.readouterr()
    return code, (json.loads(out) if out.strip().startswith("{") else {}), err


def named(stale: list[dict], batch_id: int) -> dict:
    found = [s for s in stale if s["batch_id"] == batch_id]
    assert len(found) == 1, stale
    return found[0]


@on_cases(("sqlite", "iceberg"), ("postgresql", "delta"))
def test_a_killed_backfill_is_named_by_status_and_maintain_then_resumed_from_the_cli_exactly_once(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, tmp_path, capfd, monkeypatch
) -> None:
    config, topic = committed_pipeline(spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url)
    before = identities(config)
    assert len(before) == 40 and set(before.values()) == {1}
    batch_id = killed_backfill(config, topic, tmp_path)
    if config.output.format == "iceberg":
        assert f"eos_batch{batch_id}_f1" in branches(config)
    else:
        assert dead_files(config, batch_id)  # the killed attempt's staged files, in no Delta commit
    where = ["--config", str(config.source)]

    # Older than the bound (0 hours here): status and maintain name it, what it holds back, the way out.
    monkeypatch.setenv(STALE_HOURS_ENV, "0")
    code, status, _ = cli_json(capfd, ["status", *where])
    assert code == 0
    stale = named(status["stale_batches"], batch_id)
    assert stale["kind"] == "backfill" and stale["planned_at"]
    text = stale["message"]
    for part in (f"batch {batch_id}", "retention", "lock", f"--resume {batch_id}", "abandon"):
        assert part in text, text
    code, report, _ = cli_json(capfd, ["maintain", *where, "--dry-run"])
    assert code == 0
    assert named(report["stale_batches"], batch_id)["message"] == text

    code, summary, err = cli_process(["backfill", *where, "--resume", str(batch_id), "--master", "local[1]"])

    assert code == 0, err
    assert f"resuming backfill batch {batch_id}" in err
    assert summary["status"] == "committed" and summary["fence"] == 2, summary
    done = open_store(config).get_batch(batch_id)
    assert done.status.value == "committed" and done.kind.value == "backfill"
    after = identities(config)
    assert after == before  # one copy of every record, the backfilled ranges included
    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 40, report.to_dict()
    if config.output.format == "iceberg":
        assert branches(config) == []  # the killed attempt's branch went with the resume
    else:
        assert dead_files(config, batch_id) == [], err  # and its staged files
        assert "files the killed attempts staged in the table" in err
    code, status, _ = cli_json(capfd, ["status", *where])
    assert status["stale_batches"] == []


@on_cases(("sqlite", "iceberg"))
def test_abandoning_a_killed_backfill_removes_its_branch_and_its_stale_entry(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, tmp_path, capfd, monkeypatch
) -> None:
    config, topic = committed_pipeline(spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url)
    batch_id = killed_backfill(config, topic, tmp_path)
    assert f"eos_batch{batch_id}_f1" in branches(config)
    where = ["--config", str(config.source)]

    code, out, err = cli_json(capfd, ["abandon", *where, "--batch-id", str(batch_id), "--reason", "gave up"])

    assert code == 0, err
    assert out["status"] == "abandoned"
    assert f"{config.output.table}:eos_batch{batch_id}_f1" in out["branches_removed"], out
    assert branches(config) == []
    monkeypatch.setenv(STALE_HOURS_ENV, "0")
    _, status, _ = cli_json(capfd, ["status", *where])
    assert status["stale_batches"] == []
    # Nothing of the abandoned attempt reached main: one copy, as before it.
    assert verify_pipeline(spark, config).ok
    code, _, err = cli_json(capfd, ["backfill", *where, "--resume", str(batch_id)])
    assert code == 2 and f"batch {batch_id} is abandoned" in err, err


def test_resume_refuses_what_is_not_a_planned_backfill_of_this_pipeline_in_one_line(
    kafka_bootstrap, make_topic, make_pipeline, control_db_url, capsys
) -> None:
    """Unknown, scheduled, committed, another pipeline's, or mixed with a new range: exit 2, one
    line naming the batch and the way out, no fence taken."""
    from eos_ingest.plan.ranges import PlannedRange

    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(0, 5), commit=True, partition=0)
    alpha = make_pipeline([topic], control_db_url, name="alpha")
    beta = make_pipeline([make_topic(partitions=1)], control_db_url, name="beta")
    store = open_store(alpha)
    from eos_ingest.service.operations import plan_batch

    scheduled, _ = plan_batch(alpha, store)
    assert scheduled is not None
    counts = {"records_read": 5, "records_written": 5, "records_quarantined": 0}
    store.commit_batch(scheduled.batch_id, store.take_fence(scheduled.batch_id), **counts,
                       delta_version=0, quarantine_delta_version=0)  # fmt: skip
    done = store.create_backfill("alpha", [PlannedRange(topic, 0, 0, 5)], reason="r")
    store.commit_batch(done.batch_id, store.take_fence(done.batch_id), **counts,
                       delta_version=1, quarantine_delta_version=1)  # fmt: skip
    planned = store.create_backfill("alpha", [PlannedRange(topic, 0, 1, 3)], reason="r")
    scheduled_again, _ = plan_batch(alpha, store)  # nothing new: no scheduled batch planned
    assert scheduled_again is None

    def refused(config, batch_id: int, *extra: str) -> str:
        capsys.readouterr()
        code = cli_main(["backfill", "--config", str(config.source), "--resume", str(batch_id), *extra])
        out, err = capsys.readouterr()
        assert code == 2 and out == "", (code, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        return lines[0]

    line = refused(alpha, 9999)
    assert "batch 9999 does not exist" in line and "eos-ingest status --pipeline alpha" in line
    line = refused(alpha, scheduled.batch_id)
    assert f"batch {scheduled.batch_id} is a scheduled batch" in line and "eos-ingest run" in line
    line = refused(alpha, done.batch_id)
    assert f"batch {done.batch_id} is committed, not planned" in line and "eos-ingest backfill" in line
    line = refused(beta, planned.batch_id)
    assert f"batch {planned.batch_id} belongs to pipeline 'alpha'" in line and "--pipeline alpha" in line
    line = refused(alpha, planned.batch_id, "--topic", topic)
    assert "--resume" in line and "--topic" in line
    assert store.get_batch(planned.batch_id).fence == 0  # no attempt was started


def test_the_backfill_dags_retried_recording_task_finds_its_batch_past_a_hundred_newer_ones(
    kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    """record_backfill of a cleared or retried backfill DAG run returns the batch the run recorded
    (its spark_ingest then resumes it under a new fence), however many batches came since; it
    looked among the newest 100 and recorded a second, never-run backfill past them."""
    from eos_ingest.plan.ranges import PlannedRange
    from eos_ingest.service.backfill import create_backfill, parse_request
    from eos_ingest.service.operations import plan_batch

    topic = make_topic(partitions=1)
    TxProducer(kafka_bootstrap).transaction(topic, rows(0, 5), commit=True, partition=0)
    config = make_pipeline([topic], control_db_url, name="alpha")
    store = open_store(config)
    scheduled, _ = plan_batch(config, store)
    assert scheduled is not None
    store.commit_batch(scheduled.batch_id, store.take_fence(scheduled.batch_id), records_read=5,
                       records_written=5, records_quarantined=0, delta_version=0,
                       quarantine_delta_version=0)  # fmt: skip
    request = parse_request(
        {"topic": topic, "partitions": [0], "start_offset": 1, "end_offset": 4, "reason": "replay"},
        config.topics,
    )
    first = create_backfill(config, store, request, airflow_run_id="manual__2026-12-06")
    for _ in range(101):  # other runs' backfills, newer than the run's own
        store.create_backfill("alpha", [PlannedRange(topic, 0, 0, 1)], reason="other run")

    again = create_backfill(config, store, request, airflow_run_id="manual__2026-12-06")

    assert again.batch_id == first.batch_id
    assert len(store.planned_batches("alpha")) == 102

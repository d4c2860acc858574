"""`eos-ingest run --until-caught-up`: a backlog in one Spark session, each batch committed on its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from eos_ingest.batch.attempt import PAUSE_BEFORE_COMMIT_ENV
from eos_ingest.control.store import BatchStatus
from eos_ingest.kafka.offsets import fetch_partition_offsets
from eos_ingest.plan.ranges import TopicPartition
from eos_ingest.service.operations import job_argv
from eos_ingest.spark.session import spark_submit_env
from tests.fixtures.pipelines import on_cases, pending_scheduled_batch, verify_pipeline
from tests.helpers.batches import planned_batch
from tests.helpers.kafka import TxProducer
from tests.helpers.processes import finish, wait_for_pause

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@on_cases(("postgresql", "delta"), ("sqlite", "iceberg"))
def test_a_kill_in_a_later_batch_loses_only_that_batch_and_a_rerun_catches_up_in_one_session(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url, tmp_path
) -> None:
    topic = make_topic(partitions=2)
    # 350 committed and 50 aborted records over the 2 partitions (planned_batch adds 300 + 50),
    # about 205 offsets a partition with the markers, in batches of at most 80 offsets per
    # partition: 3 batches (the kill in the second, the rerun runs the second and the third).
    TxProducer(kafka_bootstrap).transaction(
        topic, [{"id": 1000 + i, "name": "z", "amount": 3.0} for i in range(50)], commit=True
    )
    config, store, first = planned_batch(
        kafka_bootstrap,
        topic,
        lambda t, url: make_pipeline(t, url, max_records_per_partition=80),
        control_db_url,
    )

    # Attempt 1: batch 1 commits, then the job is killed -9 in batch 2 between write and commit.
    pause, log = tmp_path / "pause", tmp_path / "job1.log"
    env = {**spark_submit_env(), PAUSE_BEFORE_COMMIT_ENV: str(pause)}
    argv = job_argv(config, first, "local[1]", driver_memory="1g", until_caught_up=True)
    with log.open("w") as out:
        job = subprocess.Popen(argv, env=env, start_new_session=True, stdout=out, stderr=subprocess.STDOUT)
    wait_for_pause(job, pause, log)
    pause.unlink()  # batch 1 goes on to its commit
    wait_for_pause(job, pause, log)  # batch 2 holds before its commit, its rows written
    os.killpg(job.pid, signal.SIGKILL)
    finish(job, log)

    assert store.get_batch(first.batch_id).status is BatchStatus.COMMITTED
    second = pending_scheduled_batch(store, config.name)
    assert second is not None and second.batch_id > first.batch_id, "batch 2 stays planned after the kill"
    assert len(verify_pipeline(spark, config).examples["duplicates"]) == 0

    # Attempt 2, through the CLI: batch 2 again (same ranges), then the rest, in one Spark session.
    done = subprocess.run(
        [sys.executable, "-m", "eos_ingest.cli", "run", "--config", str(config.source),
         "--master", "local[1]", "--until-caught-up"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-5000:]
    batches = json.loads(done.stdout)["batches"]
    assert batches[0]["batch_id"] == second.batch_id
    assert len(batches) >= 2 and all(b["status"] == "committed" for b in batches)
    assert batches[0]["ranges"] == [
        {"topic": r.topic, "partition": r.partition, "start": r.start, "end": r.end} for r in second.ranges
    ]
    lines = [json.loads(x) for x in done.stderr.splitlines() if x.startswith('{"status": "committed"')]
    assert [x["batch_id"] for x in lines] == [b["batch_id"] for b in batches]
    assert len({x["spark_application_id"] for x in lines}) == 1, "every batch of the run in one session"

    # Caught up: every partition committed to its last stable offset, each record exactly once.
    lso = {
        TopicPartition(o.topic, o.partition): o.last_stable
        for o in fetch_partition_offsets(config.kafka_settings, [topic])
    }
    assert store.committed_offsets(config.name) == lso
    report = verify_pipeline(spark, config)
    assert report.ok and report.expected == 350, report

"""Operator commands and the job refuse what is not theirs: another pipeline's batch, unknown partitions."""

from __future__ import annotations

import subprocess
import sys

import pytest

from eos_ingest import paths
from eos_ingest.batch.job import run_job
from eos_ingest.cli import main as cli_main
from eos_ingest.cli import open_store, plan_batch
from eos_ingest.errors import BatchStateError
from eos_ingest.spark.session import spark_submit_env
from tests.helpers.kafka import TxProducer

pytestmark = pytest.mark.integration


def two_pipelines_one_db(kafka_bootstrap, make_topic, make_pipeline, control_db_url):
    """Pipelines alpha and beta in one control DB; alpha has a planned batch."""
    topic_a, topic_b = make_topic(partitions=1), make_topic(partitions=1)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic_a, [{"id": 1, "name": "a", "amount": 1.0}] * 5, commit=True, partition=0)
    alpha = make_pipeline([topic_a], control_db_url, name="alpha")
    beta = make_pipeline([topic_b], control_db_url, name="beta")
    store = open_store(alpha)
    batch, _ = plan_batch(alpha, store)
    assert batch is not None and batch.pipeline == "alpha"
    return alpha, beta, store, batch


def assert_refused(message: str, batch_id: int) -> None:
    for part in (f"batch {batch_id}", "pipeline 'alpha'", "not to pipeline 'beta'", "--pipeline alpha"):
        assert part in message, message


def test_job_refuses_another_pipelines_batch_before_taking_its_fence(
    kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    alpha, beta, store, batch = two_pipelines_one_db(
        kafka_bootstrap, make_topic, make_pipeline, control_db_url
    )

    with pytest.raises(BatchStateError) as refused:
        run_job(beta.source, batch.batch_id)
    assert_refused(str(refused.value), batch.batch_id)
    # The entrypoint spark-submit runs: exit 2 (needs a person), the refusal on stderr.
    entry = subprocess.run(
        [sys.executable, str(paths.JOB_SCRIPT), "--config", str(beta.source),
         "--batch-id", str(batch.batch_id)],
        capture_output=True, text=True, timeout=120, check=False, env=spark_submit_env(),
    )  # fmt: skip
    assert entry.returncode == 2, entry.stderr
    assert_refused(entry.stderr, batch.batch_id)

    unchanged = store.get_batch(batch.batch_id)
    assert unchanged.status.value == "planned" and unchanged.fence == 0
    assert not beta.output_path.exists() and not alpha.output_path.exists()


def test_abandon_refuses_another_pipelines_batch(
    kafka_bootstrap, make_topic, make_pipeline, control_db_url, capsys
) -> None:
    alpha, beta, store, batch = two_pipelines_one_db(
        kafka_bootstrap, make_topic, make_pipeline, control_db_url
    )
    args = ["--batch-id", str(batch.batch_id), "--reason", "wrong one"]

    assert cli_main(["abandon", "--config", str(beta.source), *args]) == 2
    assert_refused(capsys.readouterr().err, batch.batch_id)
    assert store.get_batch(batch.batch_id).status.value == "planned"

    assert cli_main(["abandon", "--config", str(alpha.source), *args]) == 0
    assert store.get_batch(batch.batch_id).status.value == "abandoned"


def test_reset_offsets_with_partitions_moves_only_those_and_refuses_unknown_ones(
    kafka_bootstrap, make_topic, make_pipeline, control_db_url, capsys
) -> None:
    topic = make_topic(partitions=3)
    producer = TxProducer(kafka_bootstrap)
    for partition in range(3):  # offsets 0-4, marker at 5: LSO 6 everywhere
        producer.transaction(topic, [{"id": partition}] * 5, commit=True, partition=partition)
    config = make_pipeline([topic], control_db_url)
    store = open_store(config)
    store.reset_offsets(config.name, topic, {0: 1, 1: 2, 2: 3}, "test setup")

    def offsets() -> dict[int, int]:
        return {tp.partition: o for tp, o in store.committed_offsets(config.name).items()}

    base = ["reset-offsets", "--config", str(config.source), "--topic", topic, "--reason", "test"]
    for bad, words in (("0,7", "has no partition 7"), ("x", "not a comma-separated list")):
        assert cli_main([*base, "--to", "latest", "--partitions", bad]) == 2
        err = capsys.readouterr().err
        assert f"--partitions {bad!r}" in err and words in err, err
        assert offsets() == {0: 1, 1: 2, 2: 3}

    assert cli_main([*base, "--to", "latest", "--partitions", "0,2"]) == 0
    assert offsets() == {0: 6, 1: 2, 2: 6}
    assert cli_main([*base, "--to", "earliest"]) == 0  # default: every partition
    assert offsets() == {0: 0, 1: 0, 2: 0}

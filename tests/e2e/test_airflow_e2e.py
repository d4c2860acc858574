"""Airflow end to end: `airflow standalone` started by scripts/airflow.sh (one start for tests/e2e,
tests/e2e/conftest.py), pipeline e2e's ingest and backfill DAGs triggered through the REST API,
checked against the control tables, the Delta table and an independent read_committed consumer.
An idle ingest run and an invalid backfill (refused before any work) go at once, between the
backlog's run and the valid backfill: neither may change the batches, the offsets or the table.
(The invalid backfill was a test of its own, waiting for its run alone.)

The pipeline's YAML names no broker (its default points where nothing listens); the real one (the
session test broker) is only in the Airflow connection kafka_default, with a canary password: so every step provably uses
the connection, and the canary must never show in a log or a rendered template.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter

import pytest

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.store import ControlStore
from eos_ingest.kafka.offsets import fetch_partition_offsets
from tests.e2e.conftest import BAD_VALUES, CANARY, RUN_TIMEOUT_S, Stack
from tests.fixtures.pipelines import verify_pipeline

pytestmark = pytest.mark.e2e


def table_copies(spark, config: PipelineConfig) -> Counter[int]:
    """How often each offset identity appears across the table and its quarantine."""
    counts: Counter[int] = Counter()
    for path in (config.output_path, config.quarantine_path):
        for r in (
            spark.read.format("delta").load(str(path)).select("kafka_partition", "kafka_offset").collect()
        ):
            counts[r[0] * 1_000_000 + r[1]] += 1
    return counts


def delta_version(spark, config: PipelineConfig) -> int:
    from delta.tables import DeltaTable

    return int(DeltaTable.forPath(spark, str(config.output_path)).history(1).first()["version"])


def finished(stack: Stack, dag_id: str, run_id: str) -> dict[str, str | None]:
    state = stack.api.wait_for_run(dag_id, run_id, RUN_TIMEOUT_S)
    states = stack.api.task_states(dag_id, run_id)
    if state != "success":
        failed = next((t for t, s in states.items() if s == "failed"), None)
        log = stack.api.task_log(dag_id, run_id, failed)[-4000:] if failed else ""
        pytest.fail(f"{dag_id} {run_id} is {state}: {states}\n{log}")
    return states


def test_ingest_then_backfill_through_the_rest_api(stack: Stack, spark) -> None:
    api, config = stack.api, stack.config
    api.wait_for_dag("eos_ingest__e2e")
    api.wait_for_dag("eos_backfill__e2e")
    store = ControlStore(config.control_db_url)

    # The backlog in one DAG run: batch after batch in one spark_ingest task, each audited.
    run_id = api.run("eos_ingest__e2e", {"until_caught_up": True})
    assert set(finished(stack, "eos_ingest__e2e", run_id).values()) == {"success"}
    ran = sorted(
        (b for b in store.list_batches("e2e") if b.airflow_run_id == run_id), key=lambda b: b.batch_id
    )
    assert len(ran) >= 2, ran
    assert {(b.kind.value, b.status.value, b.dq_success) for b in ran} == {("scheduled", "committed", True)}
    assert sum(b.records_written or 0 for b in ran) == 60
    assert sum(b.records_quarantined or 0 for b in ran) == len(BAD_VALUES)
    stable = {
        (o.topic, o.partition): o.last_stable for o in fetch_partition_offsets(config.kafka, [stack.topic])
    }
    committed = store.committed_offsets("e2e")
    assert {(tp.topic, tp.partition): o for tp, o in committed.items()} == stable
    audit = api.xcom("eos_ingest__e2e", run_id, "validate")
    assert audit["success"] is True and [a["batch_id"] for a in audit["batches"]] == [b.batch_id for b in ran]
    events = api.get("/assets/events", limit=50)["asset_events"]
    assert any(e["uri"] == config.output_path.as_uri() and e["extra"].get("batch_ids") == [b.batch_id for b in ran]
               and e["extra"].get("records_written") == 60 for e in events), events  # fmt: skip

    # Two runs at once that must change nothing. Nothing new: the plan short-circuits, no Spark
    # work, and the run stays green. An invalid backfill (partition 1 beyond its committed offset)
    # fails at once, in record_backfill's first try, before any work; one without a reason is not
    # even triggered.
    version = delta_version(spark, config)
    no_reason = api.trigger("eos_backfill__e2e", {"topic": stack.topic, "partitions": [1]})
    assert no_reason.status_code == 400 and "reason" in no_reason.text
    idle = api.run("eos_ingest__e2e")
    too_far = {
        "topic": stack.topic,
        "partitions": [1],
        "start_offset": 0,
        "end_offset": 10**9,
        "reason": "too far",
    }
    refused = api.run("eos_backfill__e2e", too_far)
    assert finished(stack, "eos_ingest__e2e", idle) == {
        "plan": "success", "spark_ingest": "skipped", "validate": "skipped", "publish": "skipped",
    }  # fmt: skip
    assert api.wait_for_run("eos_backfill__e2e", refused, 300) == "failed"
    tis = api.task_instances("eos_backfill__e2e", refused)
    assert (tis["record_backfill"]["state"], tis["record_backfill"]["try_number"]) == ("failed", 1), tis
    assert tis["spark_ingest"]["state"] == "upstream_failed", tis
    log = api.task_log("eos_backfill__e2e", refused, "record_backfill")
    assert f"topic '{stack.topic}' partition 1 range [0, {10**9})" in log, log[-3000:]
    assert "goes beyond the committed offset" in log, log[-3000:]
    assert len(store.list_batches("e2e")) == len(ran), "the idle run or the refused backfill made a batch"
    assert store.committed_offsets("e2e") == committed
    assert delta_version(spark, config) == version, "the idle run or the refused backfill wrote the table"

    end = min(committed.values())
    conf = {
        "topic": stack.topic,
        "partitions": [0, 1, 2],
        "start_offset": 0,
        "end_offset": end,
        "reason": "e2e",
    }
    backfill_run = api.run("eos_backfill__e2e", conf)
    assert set(finished(stack, "eos_backfill__e2e", backfill_run).values()) == {"success"}
    (backfill,) = [b for b in store.list_batches("e2e") if b.airflow_run_id == backfill_run]
    assert (backfill.kind.value, backfill.status.value) == ("backfill", "committed")
    assert backfill.records_read and backfill.records_read > 0
    assert store.committed_offsets("e2e") == committed
    assert set(table_copies(spark, config).values()) == {1}
    report = verify_pipeline(spark, config)
    assert report.ok and report.duplicates == 0 and report.missing == 0, report.to_dict()
    assert report.expected == 60 + len(BAD_VALUES)


def test_the_api_server_listens_on_loopback_only(stack: Stack) -> None:
    port = stack.api.base_url.rsplit(":", 1)[1]
    listening = subprocess.run(
        ["ss", "-ltnH", f"sport = :{port}"], text=True, capture_output=True, check=True
    )
    addresses = {line.split()[3].rsplit(":", 1)[0] for line in listening.stdout.splitlines()}
    assert addresses and addresses <= {"127.0.0.1", "[::ffff:127.0.0.1]"}, listening.stdout


def test_the_running_airflow_registers_the_plugin_once_from_the_plugins_folder(stack: Stack) -> None:
    """scripts/airflow.sh points Airflow at plugins/, and the venv's package declares the entry
    point too: the API server lists the plugin once, from the folder, and no plugin import error."""
    plugins = stack.api.get("/plugins", limit=100)["plugins"]
    ours = [p for p in plugins if p["name"] == "eos_ingest"]
    assert len(ours) == 1 and ours[0]["source"] == "$PLUGINS_FOLDER/eos_ingest_plugin.py", ours
    assert stack.api.get("/plugins/importErrors")["import_errors"] == []


def test_kafka_secrets_never_reach_logs_or_rendered_templates(stack: Stack) -> None:
    leaks = [
        str(p) for p in stack.airflow_home.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()
    ]
    assert leaks == []
    for run in stack.api.get("/dags/eos_ingest__e2e/dagRuns")["dag_runs"]:
        tis = stack.api.task_instances("eos_ingest__e2e", run["dag_run_id"])
        if tis["spark_ingest"]["state"] != "success":
            continue  # an idle run skipped it: nothing was rendered
        fields = tis["spark_ingest"]["rendered_fields"]
        # The pipeline file goes by name (shipped with --files), never as a path on this machine.
        assert fields["application_args"][:2] == ["--config-file", "e2e.yaml"], fields
        rendered = json.dumps(fields)
        assert CANARY not in rendered and "EOS_KAFKA_SETTINGS_JSON" not in rendered

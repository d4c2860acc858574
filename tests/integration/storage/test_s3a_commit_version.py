"""The Delta version a batch records on an s3a table is the version of the commit that carries it,
even when the commit's copy to `<N>.json` fails: JdbcLogStore's test-only hook
(EOS_FAULT_DELTA_FAIL_COPY_ONCE) makes the writer's copy of the batch's temporary file to
`<N>.json` fail once. The entry (the commit) is already in the control DB, so the store does not
fail the commit: the writer completes its entry as a reader would, before Delta (which asks the
FileSystem for `<N>.json` right after the store's write) looks. So the batch commits, the control
DB records N (what Delta's commit returned), the entry is complete, and a later read (delta-rs,
which knows nothing of the coordinator, and Spark) sees N with every record once. With a store
that only logs the failed copy, the batch fails (FileNotFoundException on `<N>.json` inside
Delta's commitIfNeeded). On s3proxy with a PostgreSQL control DB."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from sqlalchemy import create_engine, text

from eos_ingest.storage.object_stores import delta_rs_table
from tests.kafka_helpers import TxProducer, read_committed
from tests.s3a_helpers import cli, commit_entries, identities

pytestmark = pytest.mark.integration
postgres_only = pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)
FAIL_COPY_ENV = "EOS_FAULT_DELTA_FAIL_COPY_ONCE"  # JdbcLogStore.FAIL_COPY_ONCE_ENV
FAIL_COPY_TABLE_ENV = "EOS_FAULT_DELTA_FAIL_COPY_TABLE"  # JdbcLogStore.FAIL_COPY_TABLE_ENV


@postgres_only
def test_a_batch_whose_log_file_copy_failed_records_the_version_of_its_commit(
    kafka_bootstrap, make_topic, make_pipeline, control_db_url, s3_server, monkeypatch, tmp_path
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    producer.transaction(topic, [{"id": i, "name": "a", "amount": 1.0} for i in range(30)], commit=True)
    bucket = s3_server.make_bucket()
    config = make_pipeline([topic], control_db_url, output={"path": f"s3a://{bucket}/tables/version"})
    table = str(config.output_path)
    env = {**os.environ, **s3_server.env}
    first = cli("run", "--config", str(config.source), "--master", "local[1]", env=env)
    assert first.returncode == 0, first.stderr[-4000:]
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    version_before = delta_rs_table(table).version()  # type: ignore[union-attr]

    # The second batch: its commit's copy to <N>.json fails once (the output table's only).
    producer.transaction(topic, [{"id": i, "name": "b", "amount": 2.0} for i in range(30, 70)], commit=True)
    marker = tmp_path / "copy_failed"
    second = cli(
        "run", "--config", str(config.source), "--master", "local[1]",
        env={**env, FAIL_COPY_ENV: str(marker), FAIL_COPY_TABLE_ENV: table},
    )  # fmt: skip
    errors = [line for line in second.stderr.splitlines() if "Error" in line or "Exception" in line]
    assert second.returncode == 0, "\n".join(errors[:20]) + "\n" + second.stderr[-2000:]
    log_file = marker.read_text()
    assert log_file.startswith(f"{table}/_delta_log/"), log_file
    name = log_file.rsplit("/", 1)[1]
    version = int(name.split(".")[0])
    assert version > version_before
    # The copy failed, yet the entry is complete and N.json is there: the writer completed it.
    assert (table, name, True) in commit_entries(control_db_url, table)
    assert delta_rs_table(table).version() == version  # type: ignore[union-attr]

    # The control DB records the version of the commit that carries the batch.
    engine = create_engine(control_db_url)
    try:
        with engine.connect() as conn:
            recorded = conn.execute(
                text(
                    "SELECT delta_version FROM eos_batches WHERE status = 'committed' ORDER BY batch_id DESC LIMIT 1"
                )
            ).scalar_one()
    finally:
        engine.dispose()
    assert recorded == version, f"recorded {recorded}, the batch's commit is version {version}"

    # A later read sees N and every record once: Spark (verify) and delta-rs.
    verify = cli("verify", "--config", str(config.source), env=env)
    assert verify.returncode == 0, verify.stdout + verify.stderr[-4000:]
    report = json.loads(verify.stdout)
    assert (report["ok"], report["missing"], report["duplicates"]) == (True, 0, 0), report
    assert all(done for _, _, done in commit_entries(control_db_url, table))
    assert delta_rs_table(table).version() == version  # type: ignore[union-attr]
    committed = {(p, o) for p, o, _ in read_committed(kafka_bootstrap, topic, 2)}
    assert identities(table, topic) == Counter(dict.fromkeys(committed, 1))

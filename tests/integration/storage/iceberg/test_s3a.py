"""An Iceberg pipeline whose warehouse (output.path) is s3a:// on a real S3 API server (s3proxy),
with its JDBC catalog on a PostgreSQL control DB: an ingest batch and a backfill replacing part of
it, each run by the job as spark-submit runs it (the CLI's own command; the access in the standard
AWS_* variables only; Iceberg's HadoopFileIO over hadoop-aws), both in one application
(s3a_app.py: one JVM start, not two), and pyiceberg (pyarrow's S3 client, not Spark)
reading the same catalog's table from the store, through the catalog and from a metadata file as
the gate's read of a staged branch does."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from eos_ingest.service.operations import job_argv, open_store, plan_batch
from eos_ingest.spark.session import spark_submit_env
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from tests.helpers.kafka import TxProducer
from tests.helpers.s3a import s3_objects

pytestmark = pytest.mark.integration

APP = Path(__file__).with_name("s3a_app.py")


def identities(table) -> Counter[tuple[int, int]]:
    """(partition, offset) of every row of a pyiceberg table, counted (a copy too many shows as 2)."""
    rows = table.scan(selected_fields=("kafka_partition", "kafka_offset")).to_arrow().to_pylist()
    return Counter((r["kafka_partition"], r["kafka_offset"]) for r in rows)


@pytest.mark.parametrize("control_db_url", ["postgresql"], indirect=True)  # config: s3a needs a shared DB
def test_an_iceberg_batch_lands_on_s3a_a_backfill_replaces_it_and_pyiceberg_reads_it(
    kafka_bootstrap, make_topic, make_pipeline, control_db_url, s3_server, monkeypatch
) -> None:
    topic = make_topic(partitions=2)
    producer = TxProducer(kafka_bootstrap)
    for partition in (0, 1):
        producer.transaction(topic, [{"id": i, "name": "n", "amount": 1.5} for i in range(10)],
                             commit=True, partition=partition)  # fmt: skip
    bucket = s3_server.make_bucket()
    output = {"format": "iceberg", "table": "lake.events", "path": f"s3a://{bucket}/wh"}
    config = make_pipeline([topic], control_db_url, name="ice_s3a", output=output, kafka_conn_id=None)
    for key, value in s3_server.env.items():  # the job's access, and pyiceberg's read in this process
        monkeypatch.setenv(key, value)
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    assert batch is not None
    argv = job_argv(config, batch, "local[1]")  # what `eos-ingest run` submits, this app for its job
    job = next(i for i, arg in enumerate(argv) if arg.endswith("ingest_batch.py"))
    backfill = {"topic": topic, "partitions": "0,1", "start_offset": 2, "end_offset": 8, "reason": "replay",
                "start_time": None, "end_time": None}  # fmt: skip

    app = subprocess.run([*argv[:job], str(APP), *argv[job + 1 :], str(config.source), json.dumps(backfill)],
                         env=spark_submit_env(), capture_output=True, text=True, timeout=900, check=False)  # fmt: skip

    assert app.returncode == 0, app.stderr[-4000:]
    replayed = store.get_batch(int(app.stdout.split("backfill batch ")[1].split()[0]))
    assert store.get_batch(batch.batch_id).status.value == replayed.status.value == "committed"
    assert replayed.records_written == 12  # 6 offsets of each partition again
    catalog = IcebergCatalog.of(config)
    table = catalog.pyiceberg().load_table("lake.events")
    on_main = identities(table)
    assert set(on_main.values()) == {1} and len(on_main) == 20  # replaced, not appended
    assert Counter(table.scan(selected_fields=("batch_id",)).to_arrow()["batch_id"].to_pylist()) == {
        batch.batch_id: 8,
        replayed.batch_id: 12,
    }
    objects = s3_objects(s3_server.env, f"s3a://{bucket}/wh/lake/events/")
    assert any(o.endswith(".parquet") for o in objects) and any(o.endswith(".metadata.json") for o in objects)
    # The gate's way to a staged branch: the metadata file the commit wrote, read from the store.
    assert table.metadata_location.startswith(f"s3a://{bucket}/wh/lake/events/metadata/")
    assert identities(catalog.pyiceberg_at("lake.events", table.metadata_location)) == on_main

"""An Iceberg pipeline whose warehouse (output.path) is s3a:// on a real S3 API server (s3proxy),
with its JDBC catalog on a PostgreSQL control DB: `eos-ingest run` and `backfill` as a user runs them
(the access in the standard AWS_* variables only; Iceberg's HadoopFileIO over hadoop-aws), and
pyiceberg (pyarrow's S3 client, not Spark) reading the same catalog's table from the store."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from eos_ingest.storage.iceberg_catalog import IcebergCatalog
from tests.kafka_helpers import TxProducer
from tests.s3a_helpers import cli, s3_objects

pytestmark = pytest.mark.integration


def on_main(config) -> Counter[tuple[int, int]]:
    """(partition, offset) of every row of main read by pyiceberg, counted (a copy too many shows as 2)."""
    table = IcebergCatalog.of(config).pyiceberg().load_table("lake.events")
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
    env = {**os.environ, **s3_server.env}
    for key, value in s3_server.env.items():  # pyiceberg's read, in this process
        monkeypatch.setenv(key, value)

    run = cli("run", "--config", str(config.source), "--master", "local[1]", env=env)

    assert run.returncode == 0, run.stderr[-4000:]
    first = on_main(config)
    assert set(first.values()) == {1} and len(first) == 20
    objects = s3_objects(s3_server.env, f"s3a://{bucket}/wh/lake/events/")
    assert any(o.endswith(".parquet") for o in objects) and any(o.endswith(".metadata.json") for o in objects)

    backfill = cli("backfill", "--config", str(config.source), "--topic", topic, "--partitions", "0,1",
                   "--start-offset", "2", "--end-offset", "8", "--reason", "replay", "--master", "local[1]",
                   env=env)  # fmt: skip

    assert backfill.returncode == 0, backfill.stderr[-4000:]
    assert json.loads(backfill.stdout)["records_written"] == 12  # 6 offsets of each partition again
    assert on_main(config) == first  # replaced, not appended

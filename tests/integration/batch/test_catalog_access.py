"""A JDBC catalog whose database refuses the pipeline's user (issue 48): PostgreSQL's
insufficient_privilege (SQLState 42501) on the catalog's iceberg_tables, after a REVOKE of UPDATE,
is a refusal, not a commit of unknown outcome (storage/commit_outcomes.py). The batch's first
catalog commit (the cut of its branch) is refused: the error is CatalogAccessError, exit 2, one
line naming the table and the grant; the batch stays planned, main is as before and no branch is
left. Once the grant is back, the rerun commits the batch: one copy of each record. A new table's
creation refused (INSERT on iceberg_tables revoked) is the same CatalogAccessError, naming it.

Real broker, Spark, Iceberg's JDBC catalog and PostgreSQL (the session's test server, with a role
of this test's own); the batches run in the test's Spark session.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from eos_ingest.batch.sequence import run_fenced
from eos_ingest.control.schema import BatchStatus
from eos_ingest.errors import EXIT_NEEDS_A_PERSON, CatalogAccessError, EosIngestError, exit_code
from eos_ingest.service.operations import open_store, plan_batch
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from tests.fixtures.pipelines import ingest_once, on_cases
from tests.helpers.kafka import TxProducer
from tests.helpers.postgres_roles import pipeline_role
from tests.helpers.rescan import assert_each_committed_record_once

pytestmark = pytest.mark.integration

RECORDS = 8


def rows(first: int, end: int) -> list[dict]:
    return [{"id": i, "name": f"n{i}", "amount": i / 2} for i in range(first, end)]


def on_main(config, table: str) -> tuple[int | None, Counter[int], list[str]]:
    """main's snapshot id, the ids of its rows (copies each) and the table's refs, by pyiceberg."""
    loaded = IcebergCatalog.of(config).pyiceberg().load_table(table)
    ids = loaded.scan(selected_fields=("id",)).to_arrow()["id"].to_pylist()
    snapshot = loaded.current_snapshot()
    return (snapshot.snapshot_id if snapshot else None), Counter(ids), sorted(loaded.metadata.refs)


@on_cases(("postgresql", "iceberg"))
def test_a_catalog_database_that_refuses_the_pipelines_user_leaves_the_batch_planned_and_names_the_grant(
    spark, kafka_bootstrap, make_topic, make_pipeline, control_db_url
) -> None:
    # The pipeline's user owns what it creates (the control tables, the catalog's tables), as a
    # deployment's would; a DBA's REVOKE later takes UPDATE on iceberg_tables from it.
    with pipeline_role(control_db_url) as role:
        as_admin, user_url = role.as_admin, role.url
        topic = make_topic(partitions=1)
        producer = TxProducer(kafka_bootstrap)
        producer.transaction(topic, rows(0, RECORDS), commit=True, partition=0)
        name = f"refused_{uuid.uuid4().hex[:8]}"
        table = f"lake.{name}"
        config = make_pipeline([topic], user_url, name=name)
        store = open_store(config)
        try:
            first = ingest_once(spark, config)
            assert first is not None and first.records_written == RECORDS
            before = on_main(config, table)
            assert before[1] == Counter(range(RECORDS)) and before[2] == ["main"], before

            as_admin(f'REVOKE UPDATE ON iceberg_tables FROM "{role.name}"')
            producer.transaction(topic, rows(RECORDS, 2 * RECORDS), commit=True, partition=0)
            batch, _ = plan_batch(config, store)
            assert batch is not None
            with pytest.raises(EosIngestError) as raised:
                run_fenced(spark, config, store, batch)

            error = raised.value
            assert isinstance(error, CatalogAccessError), repr(error)
            assert exit_code(error) == EXIT_NEEDS_A_PERSON
            line = str(error)
            assert "\n" not in line, line
            for named in (table, "42501", "UPDATE", "iceberg_tables"):
                assert named in line, (named, line)
            assert store.get_batch(batch.batch_id).status is BatchStatus.PLANNED
            assert on_main(config, table) == before  # nothing published, no branch left

            as_admin(f'GRANT UPDATE ON iceberg_tables TO "{role.name}"')
            again = ingest_once(spark, config)  # plan returns the planned batch; a new fence
            assert again is not None and again.batch_id == batch.batch_id
            assert store.get_batch(batch.batch_id).status is BatchStatus.COMMITTED
            _, ids, refs = on_main(config, table)
            assert ids == Counter(range(2 * RECORDS)) and refs == ["main"], (ids, refs)
            assert_each_committed_record_once(spark, config)  # by a raw read_committed rescan of the topic

            # A new table's creation refused the same way (a REVOKE of INSERT on iceberg_tables): one
            # line naming the table and the grant, not the raw error; the batch planned, no table.
            as_admin(f'REVOKE INSERT ON iceberg_tables FROM "{role.name}"')
            new_name = f"refused_new_{uuid.uuid4().hex[:8]}"
            creating = make_pipeline([topic], user_url, name=new_name)
            creating_store = open_store(creating)
            try:
                new_batch, _ = plan_batch(creating, creating_store)
                assert new_batch is not None
                with pytest.raises(EosIngestError) as raised:
                    run_fenced(spark, creating, creating_store, new_batch)
                assert isinstance(raised.value, CatalogAccessError), repr(raised.value)
                line = str(raised.value)
                assert "\n" not in line and line.startswith("creating the Iceberg table "), line
                assert f"lake.{new_name} was refused" in line, line
                assert "42501" in line and "iceberg_tables" in line, line
                assert creating_store.get_batch(new_batch.batch_id).status is BatchStatus.PLANNED
                assert not IcebergCatalog.of(creating).pyiceberg().table_exists(f"lake.{new_name}")
            finally:
                creating_store.close()
        finally:
            store.close()

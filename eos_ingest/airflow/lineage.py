"""OpenLineage datasets of a pipeline: its Kafka topics in, its table and quarantine table out.

The ingest and backfill DAGs' spark_ingest task (airflow/operator.py, BatchSparkSubmitOperator) returns
these from get_openlineage_facets_on_start/complete, the methods the OpenLineage provider's
listener asks an operator for (docs/lineage.md). The provider is optional (the ``lineage`` extra):
it is imported here only, and only when its listener calls, so the DAGs parse and run without it.

Names follow OpenLineage's naming conventions: a topic is ``kafka://{bootstrap host}:{port}`` +
the topic; a table, Delta or Iceberg, is named by its location (storage/table_names.py): a local
table ``file`` + its absolute path; an s3a:// table ``s3://{bucket}`` + the key (OpenLineage's
Spark integration names s3a paths and Iceberg tables the same way, so the two join).
"""

from __future__ import annotations

from typing import Any

from eos_ingest.config.pipeline import PipelineConfig, load_pipeline
from eos_ingest.config.table_location import TableLocation
from eos_ingest.storage.table_names import OUTPUT_TABLES, location_dataset, output_names


def kafka_namespace(bootstrap_servers: str) -> str:
    """``kafka://host:port`` of the first bootstrap server (a listener prefix such as SSL:// dropped)."""
    first = bootstrap_servers.split(",")[0].strip()
    return f"kafka://{first.split('://', 1)[-1]}"


def table_dataset(location: TableLocation) -> tuple[str, str]:
    """(namespace, name) of a table in the folder or s3a:// URI `location`."""
    return location_dataset(location)


def brokers_in_file(config: PipelineConfig) -> bool:
    """Whether the pipeline file alone names the brokers the job reads from: a connection's settings
    must agree with the file's (airflow_conn), and replace them only when the file has no `kafka:`."""
    return not (config.kafka_is_default and config.kafka_conn_id)


def datasets(
    config: PipelineConfig, *, with_inputs: bool = True
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(inputs, outputs) as (namespace, name): the topics; the table, then its quarantine."""
    namespace = kafka_namespace(config.kafka["bootstrap.servers"])
    inputs = [(namespace, topic) for topic in config.topics] if with_inputs else []
    names = output_names(config)
    return inputs, [names[which].dataset for which in OUTPUT_TABLES]


def operator_lineage(pipeline_file: str, run_config: PipelineConfig | None) -> Any:
    """The provider's OperatorLineage of a spark_ingest task. Called by the provider only.

    `run_config` is the config the task ran with (its Kafka connection joined), once execute has
    resolved it. Before (the START event), the pipeline file alone: no connection is looked up here,
    as the listener runs this in a forked process where that can hang until the provider's
    execution_timeout drops the event. Then the topics are named only when the file names their
    brokers (brokers_in_file); the COMPLETE or FAIL event names them in any case.
    """
    # The provider is the optional `lineage` extra: imported only when its listener calls this.
    from airflow.providers.common.compat.openlineage.facet import Dataset  # noqa: PLC0415 optional provider
    from airflow.providers.openlineage.extractors import OperatorLineage  # noqa: PLC0415 optional provider

    config = run_config or load_pipeline(pipeline_file)
    inputs, outputs = datasets(config, with_inputs=run_config is not None or brokers_in_file(config))
    return OperatorLineage(
        inputs=[Dataset(namespace=ns, name=name) for ns, name in inputs],
        outputs=[Dataset(namespace=ns, name=name) for ns, name in outputs],
    )

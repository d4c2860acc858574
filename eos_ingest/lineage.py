"""OpenLineage datasets of a pipeline: its Kafka topics in, its Delta table and quarantine out.

The ingest and backfill DAGs' spark_ingest task (airflow_dags.BatchSparkSubmitOperator) returns
these from get_openlineage_facets_on_start/complete, the methods the OpenLineage provider's
listener asks an operator for (docs/lineage.md). The provider is optional (the ``lineage`` extra):
it is imported here only, and only when its listener calls, so the DAGs parse and run without it.

Names follow OpenLineage's naming conventions: a topic is ``kafka://{bootstrap host}:{port}`` +
the topic; a local table ``file`` + its absolute path; an s3a:// table ``s3://{bucket}`` + the key
(OpenLineage's Spark integration names s3a paths the same way, so the two join).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from eos_ingest.config import PipelineConfig
from eos_ingest.object_storage import TableLocation, is_object_store


def kafka_namespace(bootstrap_servers: str) -> str:
    """``kafka://host:port`` of the first bootstrap server (a listener prefix such as SSL:// dropped)."""
    first = bootstrap_servers.split(",")[0].strip()
    return f"kafka://{first.split('://', 1)[-1]}"


def table_dataset(location: TableLocation) -> tuple[str, str]:
    """(namespace, name) of a Delta table's folder."""
    if is_object_store(location):
        uri = urlsplit(str(location))
        return f"s3://{uri.netloc}", uri.path.strip("/")
    return "file", str(location)


def datasets(config: PipelineConfig) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(inputs, outputs) as (namespace, name): the topics; the table, then its quarantine."""
    namespace = kafka_namespace(config.kafka["bootstrap.servers"])
    inputs = [(namespace, topic) for topic in config.topics]
    return inputs, [table_dataset(config.output_path), table_dataset(config.quarantine_path)]


def operator_lineage(pipeline_file: str) -> Any:
    """The provider's OperatorLineage for the pipeline file, with the Airflow Kafka connection joined
    (its bootstrap servers win over the file's, as in the job). Called by the provider only."""
    from airflow.providers.common.compat.openlineage.facet import Dataset
    from airflow.providers.openlineage.extractors import OperatorLineage

    from eos_ingest.airflow_conn import config_from_airflow
    from eos_ingest.config import load_pipeline

    config, _ = config_from_airflow(load_pipeline(pipeline_file))
    inputs, outputs = datasets(config)
    return OperatorLineage(
        inputs=[Dataset(namespace=ns, name=name) for ns, name in inputs],
        outputs=[Dataset(namespace=ns, name=name) for ns, name in outputs],
    )

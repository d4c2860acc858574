"""The Airflow edge: the DAG factory and its operator, the alerts DAG, the Ingestion page plugin, its charts (SVG drawn on the server) and who may see it, DAG ids, OpenLineage datasets.

Imports service/ and everything below it. Not Airflow itself: that is `airflow` under absolute imports."""

"""Airflow connections read without a running Airflow: Kafka's, AWS's and the schema registry's, merged into a pipeline's settings.

Imports config/ and the package root."""

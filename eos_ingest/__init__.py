"""eos-ingest: exactly-once batch ingestion from Apache Kafka into Delta Lake."""

__version__ = "0.1.0"

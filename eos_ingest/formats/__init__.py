"""Kafka's bytes to rows: JSON and Avro values, keys and headers, the quarantine of what does not parse, and the output schema's evolution under new Avro schemas.

Imports config/, schema/ and the package root. Inside, imports run one way: schema_evolution -> parser -> avro_key -> avro_decode -> evolution_rules (the Spark-free rules avro_decode and schema_evolution both need)."""

"""The bench's peer for Iceberg: Apache Iceberg's own Kafka Connect sink, run for real.

    python -m bench.iceberg_connect --records 50000 --kills 3   # a clean run, then one with 3 SIGKILLs

`jars.sh` fetches Kafka Connect's runtime and the sink (jvm/iceberg-connect/pom.xml) on first use;
`worker.py` starts a standalone Connect worker with the sink on Iceberg's JDBC catalog (SQLite) and
a local warehouse; `table.py` reads the table's current snapshot without a JVM; `measure.py` times
the way to a table holding every committed record and counts duplicates and missing records
against Kafka's read_committed view; `report.py` renders its section of bench/README.md.

`make bench` runs the same sink and eos-ingest on Iceberg as its systems (j) and (i), clean, through
bench/iceberg_systems.py (the sink's worker started before the clock: `measure.run(worker_running=True)`).
"""

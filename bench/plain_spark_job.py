"""What a user would write by hand, for `make bench` to compare eos-ingest with (spark-submit it).

    spark-submit ... bench/plain_spark_job.py --bootstrap B --topic T --schema S --output PATH
        (b) batch: Kafka read_committed, earliest -> latest, from_json, Delta append
    ... --streaming --checkpoint PATH
        (c) Structured Streaming, Trigger.AvailableNow, into Delta with a checkpoint

Both keep the Kafka identity columns beside the payload, as eos-ingest does; no partitioning, no
checks, no control DB.
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F


def rows(frame: DataFrame, schema: str) -> DataFrame:
    return frame.select(
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("key").alias("kafka_key"),
        F.from_json(F.col("value").cast("string"), schema).alias("v"),
    ).select("kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp", "kafka_key", "v.*")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--streaming", action="store_true")
    parser.add_argument("--checkpoint")
    args = parser.parse_args()
    spark = SparkSession.builder.appName("bench plain spark").getOrCreate()
    options = {
        "kafka.bootstrap.servers": args.bootstrap,
        "subscribe": args.topic,
        "kafka.isolation.level": "read_committed",
        "startingOffsets": "earliest",
        "failOnDataLoss": "true",
    }
    if args.streaming:
        source = spark.readStream.format("kafka").options(**options).load()
        query = (
            rows(source, args.schema)
            .writeStream.format("delta")
            .option("checkpointLocation", args.checkpoint)
            .trigger(availableNow=True)
            .start(args.output)
        )
        query.awaitTermination()
    else:
        source = spark.read.format("kafka").options(**options, endingOffsets="latest").load()
        rows(source, args.schema).write.format("delta").mode("append").save(args.output)
    spark.stop()


if __name__ == "__main__":
    main()

"""Spark: the session's settings, the spark-submit command line, the Spark read of exactly the planned
Kafka ranges, and the JVM's class-data archive that starts it faster (with the job it is trained on).

Imports storage/ (tables on S3 API stores, the training job's writes), formats/ (the training
job's parse), kafka/ and plan/ (the read's options), config/ and the package root."""

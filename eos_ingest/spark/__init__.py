"""Spark: the session's settings, the spark-submit command line, and the JVM's class-data archive that starts it faster.

Imports storage/ (tables on S3 API stores), config/ and the package root."""

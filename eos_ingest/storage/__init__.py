"""The output tables, by format: storage/delta/ (Delta Lake, the default) and storage/iceberg/
(Apache Iceberg), neither importing the other. Here at the top, what both share: table_format, the
one interface a batch writes through (stage a replace of its ranges, read back what the commit will
publish, commit, abort, version), and table_reader, what reads the published tables; table_formats
names the implementations; table_names, batch_rows, lost_races, commit_outcomes and object_stores
(tables on S3 API stores) serve both.

Imports control/, config/, plan/ and the package root."""

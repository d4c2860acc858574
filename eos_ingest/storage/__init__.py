"""The output tables, by format: storage/delta/ (Delta Lake, the default) and storage/iceberg/
(Apache Iceberg), neither importing the other. Here at the top, what both share: table_format, the
one interface a batch writes through (stage a replace of its ranges, read back what the commit will
publish, commit, abort, version), and table_reader, what reads the published tables; table_formats
names the implementations (the one module here that imports the format folders); and what both
formats use: table_names, batch_rows, replace_predicate, lost_races, commit_outcomes, full_disks,
maintain_deletes (maintain's VACUUM lock and retention) and object_stores (tables on S3 API stores).

Imports control/, config/, plan/ and the package root."""

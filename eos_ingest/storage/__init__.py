"""The output tables. table_format is the one interface a batch writes through (stage a replace of
its ranges, read back what the commit will publish, commit, abort, version); table_formats names
the implementations: Delta's is delta_format over writer and staged_write, with the table features
it refuses (table_features). Besides: maintenance (OPTIMIZE, VACUUM under the lock) and tables on
S3 API stores (object_stores).

Imports control/, config/, plan/ and the package root."""

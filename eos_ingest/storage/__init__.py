"""The output tables: the staged replace of a batch's ranges (stage, read back, commit, abort, version), the table features it refuses, maintenance (OPTIMIZE, VACUUM under the lock), tables on S3 API stores.

Imports control/, config/, plan/ and the package root."""

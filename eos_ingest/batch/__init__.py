"""One batch, start to end, in the spark-submit job: read exactly the planned ranges, parse, stage, gate, commit, record.

Imports service/ and everything below it."""

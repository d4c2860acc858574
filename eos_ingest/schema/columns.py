"""The names of the columns: the output's metadata columns, and the columns the parser adds beside
a value's own while it parses a batch.

Here, below formats/ and config/, because both sides need the same names: the parser and the Avro
key's decoder add the internal columns, and the DDL check of value.schema (ddl.py) refuses a payload
column that would collide with one (Spark names are case-insensitive).
"""

from __future__ import annotations

# Identity first: Delta keeps min/max statistics for the leading columns, and a replace of a
# range prunes files with them.
IDENTITY_COLUMNS = ("kafka_topic", "kafka_partition", "kafka_offset")
META_COLUMNS = (*IDENTITY_COLUMNS, "kafka_timestamp", "kafka_key", "batch_id")
QUARANTINE_COLUMNS = (*META_COLUMNS, "raw_value", "error")
# Every metadata column of the output, the optional ones too: no payload column may take one.
RESERVED_COLUMNS = frozenset({"kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp",
                              "kafka_key", "batch_id", "event_date", "kafka_headers",
                              "kafka_timestamp_type"})  # fmt: skip

CORRUPT_RECORD = "_eos_corrupt_record"
PARSE_ERROR = "_eos_error"
# The fields of a good row that the schema does not read (null when none): formats/schema_evolution.py.
UNKNOWN_FIELDS = "_eos_unknown_fields"
# key.format avro: a quarantined record whose key did not decode keeps the key's bytes here.
RAW_KEY = "raw_key"
# key.format avro: the columns avro_key.decode adds (the key's schema id and body, the decoded
# struct, why it did not decode).
KEY_ID = "_eos_key_id"
KEY_BODY = "_eos_key_body"
KEY_DECODED = "_eos_key"
KEY_ERROR = "_eos_key_error"
KEY_COLUMNS = (KEY_ID, KEY_BODY, KEY_DECODED, KEY_ERROR)
# Columns parser.parse adds next to the payload: a payload column of the same name breaks the job,
# so the config refuses them.
INTERNAL_COLUMNS = ("raw_value", RAW_KEY, PARSE_ERROR, CORRUPT_RECORD, UNKNOWN_FIELDS, *KEY_COLUMNS)

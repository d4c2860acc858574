"""Avro test data in the Schema Registry wire format: two compatible record schemas, framing a
record as confluent-kafka's AvroSerializer does, and reading the id back from a framed value."""

from __future__ import annotations

import io
import struct

import fastavro

V1 = {"type": "record", "name": "Order", "namespace": "shop",
      "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}  # fmt: skip
# v2 adds a field with a default: a v1 record read with v2 gets the default.
V2 = {**V1, "fields": [*V1["fields"], {"name": "amount", "type": "double", "default": -1.0}]}


def framed(schema_id: int, schema: dict, record: dict) -> bytes:
    """The Schema Registry wire format: magic byte 0, the id (big-endian int32), the Avro body."""
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(schema), record)
    return b"\x00" + struct.pack(">I", schema_id) + body.getvalue()


def schema_id(value: bytes) -> int:
    """The id of a value in the wire format: the 4 bytes after the magic byte."""
    assert value[:1] == b"\x00", value
    return int(struct.unpack(">I", value[1:5])[0])

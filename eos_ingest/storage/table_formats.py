"""The table formats eos-ingest writes, by name: a pipeline's output table is one of these."""

from __future__ import annotations

from eos_ingest.storage.delta_format import DELTA
from eos_ingest.storage.table_format import TableFormat

FORMATS: dict[str, TableFormat] = {DELTA.name: DELTA}


def output_format(name: str = "delta") -> TableFormat:
    """The implementation of the table format `name`."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown table format {name!r}; eos-ingest writes {', '.join(FORMATS)}") from None

"""The batch's rows as the gate and the audit hand them to GX: RANGE_COLUMN added (on Spark, or on
pandas for the audit and the gate's frame) and Arrow made the pandas frame GX validates.

Apart from quality/suite.py so that what imports the suite alone (the status page's Data Docs
links, every CLI command) does not import pandas, numpy and pyarrow: ~110 MB and ~0.9 s of CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from eos_ingest.plan.ranges import PlannedRange, merge_ranges
from eos_ingest.quality.suite import RANGE_COLUMN
from eos_ingest.schema.columns import IDENTITY_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame


def with_range_column(rows: DataFrame, ranges: Sequence[PlannedRange]) -> DataFrame:
    """`rows` plus RANGE_COLUMN: null inside the planned ranges, else what is wrong with the row.

    A row with a null identity gets null here too: the not-null expectations report it.
    """
    from pyspark.sql import functions as F  # noqa: PLC0415 JVM-free: the audit imports this module

    topic, partition, offset = (F.col(c) for c in IDENTITY_COLUMNS)
    spans = merge_ranges(ranges)
    inside: Column = F.lit(False)
    planned: Column = F.lit("none")  # text of the partition's planned ranges, for the message
    for (t, p), intervals in sorted(spans.items(), reverse=True):
        in_partition = (topic == F.lit(t)) & (partition == F.lit(p))
        for start, end in intervals:
            inside = inside | (in_partition & (offset >= F.lit(start)) & (offset < F.lit(end)))
        text = " ".join(f"[{s}, {e})" for s, e in intervals)
        planned = F.when(in_partition, F.lit(text)).otherwise(planned)
    problem = F.format_string("%s[%d] offset %d outside planned %s", topic, partition, offset, planned)
    return rows.withColumn(RANGE_COLUMN, F.when(~inside, problem))


def arrow_frame(table: pa.Table, ranges: Sequence[PlannedRange]) -> pd.DataFrame:
    """Rows read as Arrow (from Spark or from delta-rs) as the pandas frame GX validates, with
    RANGE_COLUMN. The topic becomes a category: one string per topic, not per row, so a
    million-row batch's identities take about 13 MB."""
    if "kafka_topic" in table.column_names:
        index = table.column_names.index("kafka_topic")
        table = table.set_column(index, "kafka_topic", pc.dictionary_encode(table["kafka_topic"]))
    return with_range_column_pandas(table.to_pandas(), ranges)


def with_range_column_pandas(frame: pd.DataFrame, ranges: Sequence[PlannedRange]) -> pd.DataFrame:
    """with_range_column for a pandas frame (the audit's): the same values, the same texts."""
    topic, partition, offset = (frame[c] for c in IDENTITY_COLUMNS)
    spans = merge_ranges(ranges)
    inside = np.zeros(len(frame), dtype=bool)
    planned: dict[tuple[str, int], str] = {}
    for (t, p), intervals in spans.items():
        in_partition = ((topic == t) & (partition == p)).to_numpy(dtype=bool, na_value=False)
        for start, end in intervals:
            inside |= (
                in_partition
                & (offset >= start).to_numpy(dtype=bool, na_value=False)
                & (offset < end).to_numpy(dtype=bool, na_value=False)
            )
        planned[(t, p)] = " ".join(f"[{s}, {e})" for s, e in intervals)
    # A row with a null identity gets null here too: the not-null expectations report it.
    has_identity = (topic.notna() & partition.notna() & offset.notna()).to_numpy(dtype=bool)
    problems = pd.Series([None] * len(frame), index=frame.index, dtype=object)
    for i in np.flatnonzero(~inside & has_identity):
        t, p, o = str(topic.iat[i]), int(partition.iat[i]), int(offset.iat[i])
        problems.iat[i] = f"{t}[{p}] offset {o} outside planned {planned.get((t, p), 'none')}"
    return frame.assign(**{RANGE_COLUMN: problems})

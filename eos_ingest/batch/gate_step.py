"""The gate's part in a batch attempt (docs/design.md, step 5), behind one seam.

An attempt asks its gate step three things: get ready before the Spark session starts, start
the independent count beside the read, and check the staged files before anything is published.
The job uses QualityGate (Great Expectations and the independent count) and nothing in the
package offers another; a benchmark that measures what the gate costs brings its own GateStep
(bench/ungated.py) rather than a switch the core would read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from eos_ingest.errors import QualityGateError
from eos_ingest.quality import gate as quality
from eos_ingest.quality.report import record_report

if TYPE_CHECKING:
    from concurrent.futures import Future

    from pyspark.sql import DataFrame, SparkSession

    from eos_ingest.config.pipeline import PipelineConfig
    from eos_ingest.control.store import Batch, ControlStore
    from eos_ingest.storage.table_format import StagedWrite


class GateStep(Protocol):
    """What a batch attempt runs at its gate."""

    def preload(self) -> None:
        """Called once per job before its Spark session starts (GX's import overlaps it)."""
        ...

    def start_count(self, config: PipelineConfig, batch: Batch) -> Future[int] | None:
        """Called before the Spark read: the batch's independent count of committed records, begun."""
        ...

    def check(
        self,
        spark: SparkSession,
        store: ControlStore,
        config: PipelineConfig,
        batch: Batch,
        staged: StagedWrite,
        rows: DataFrame,
        quarantined: int,
        count: Future[int] | None,
    ) -> None:
        """Check what committing `staged` would publish (`rows`: the batch's output rows, what a
        skipped write's check reads); raise to publish nothing."""
        ...


class QualityGate:
    """The gate every job runs: the default suite and the pipeline's expectations on the staged
    rows, their count against the independent read_committed count (quality/gate.py)."""

    def preload(self) -> None:
        quality.preload_gx()

    def start_count(self, config: PipelineConfig, batch: Batch) -> Future[int] | None:
        return quality.start_recount(config, batch)

    def check(
        self,
        spark: SparkSession,
        store: ControlStore,
        config: PipelineConfig,
        batch: Batch,
        staged: StagedWrite,
        rows: DataFrame,
        quarantined: int,
        count: Future[int] | None,
    ) -> None:
        """QualityGateError when a critical expectation fails: its report is recorded on the batch."""
        # The gate checks what the commit will publish: the staged files themselves, less the rows
        # of other batches that Delta's row-level rewrite of a replaced file carries over.
        checked = (
            rows if staged.skipped else staged.read_back(rows.schema).where(f"batch_id = {batch.batch_id}")
        )
        try:
            quality.gate(
                spark, config, batch, checked, quarantined, recount=count,
                staged=None if staged.skipped else staged,
            )  # fmt: skip
        except QualityGateError as failed:
            if failed.report is not None:
                record_report(store, batch.batch_id, failed.report, raise_errors=False)
            raise

"""The report of a validation (gate or audit): built from GX's result, stored on the batch row."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.control.store import ControlStore
from eos_ingest.errors import EosIngestError
from eos_ingest.quality.suite import summarize

if TYPE_CHECKING:
    from great_expectations.core import ExpectationSuiteValidationResult

log = logging.getLogger(__name__)


def build_report(
    config: PipelineConfig,
    batch_id: int,
    stage: str,
    result: ExpectationSuiteValidationResult,
    result_id: str,
    report_path: str,
    counts: dict[str, int],
    seconds: float,
) -> dict[str, Any]:
    summary = summarize(result)
    return {
        "batch_id": batch_id,
        "pipeline": config.name,
        "stage": stage,
        "success": not summary["critical_failures"],
        "statistics": {**summary["statistics"], **counts},
        "report_path": report_path,
        "failed_expectations": summary["failed_expectations"],
        "critical_failures": summary["critical_failures"],
        "warnings": summary["warnings"],
        "validation_result_id": result_id,
        "seconds": round(seconds, 2),
    }


def record_report(
    store: ControlStore, batch_id: int, report: Mapping[str, Any], *, raise_errors: bool
) -> None:
    """Store the report on the batch row with the caller's store (the batch's, or the audit's)."""
    try:
        store.record_quality(
            batch_id,
            success=bool(report["success"]),
            result_json=json.dumps(report, default=str),
            report_path=report["report_path"],
        )
    except EosIngestError:
        if raise_errors:
            raise
        # The gate's own error is the one to report; a control DB hiccup must not mask it.
        log.exception("batch %s: could not store the gate result on the batch", batch_id)

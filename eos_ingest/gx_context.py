"""The Great Expectations file context of a state folder, and one checkpoint run on a frame.

The context lives at <state folder>/gx; its config comes from eos_ingest/expectations/great_expectations.yml
(copied when it changed, never written back) and is cached per process. One GX run at a time per
state folder (a file lock): Data Docs, suites and checkpoints are files GX rewrites unlocked.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from eos_ingest import paths
from eos_ingest.config import PipelineConfig
from eos_ingest.quality_suite import EXPECTED_ROWS, build_suite, quiet_gx

if TYPE_CHECKING:
    import pandas as pd
    from great_expectations.core import ExpectationSuiteValidationResult
    from great_expectations.data_context import AbstractDataContext
    from pyspark.sql import DataFrame

__all__ = ["data_docs_index", "gx_lock", "gx_root", "open_context", "validate"]

GX_TEMPLATE = paths.GX_TEMPLATE  # package data: eos_ingest/expectations/great_expectations.yml
DATASOURCE, ASSET, BATCH_DEFINITION = "eos_spark", "batch_rows", "whole_frame"  # declared in the yml
# The audit's rows come as a pandas frame (read with delta-rs): the same asset on a pandas source.
PANDAS_DATASOURCE = "eos_pandas"
SITE = "local_site"
# SUMMARY keeps a few unexpected values per expectation: enough to name the offending rows,
# small enough to store on the batch row.
RESULT_FORMAT: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": 5}

_contexts: dict[Path, AbstractDataContext] = {}


def gx_root() -> Path:
    """The GX context's root: <state folder>/gx (config copy, suites, results, Data Docs)."""
    return paths.state_dir() / "gx"


def data_docs_index() -> Path:
    """The Data Docs home page (it lists the latest validations of every pipeline)."""
    return gx_root() / "data_docs" / "index.html"


@contextmanager
def gx_lock(root: Path) -> Iterator[None]:
    """One GX run at a time per state folder: the Data Docs index, suites and checkpoints are
    shared files that GX rewrites without locking, and several tasks may validate at once."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def open_context(root: Path) -> AbstractDataContext:
    """The file context at `root`, created from the repo's template; cached per process.

    Call under gx_lock. The template is copied only when it changed (atomically), so the
    context never writes into the repository and a running validation never sees half a file.
    """
    config_file = root / "great_expectations.yml"
    template = paths.package_text("expectations/great_expectations.yml")
    changed = not config_file.exists() or config_file.read_text(encoding="utf-8") != template
    if changed:
        partial = root / f".great_expectations.yml.{os.getpid()}"
        partial.write_text(template, encoding="utf-8")
        os.replace(partial, config_file)
    if changed or root not in _contexts:
        with quiet_gx():
            import great_expectations as gx

            _contexts[root] = gx.get_context(mode="file", context_root_dir=str(root))
    return _contexts[root]


def _report_path(context: AbstractDataContext, result_id: Any) -> str:
    """Absolute path of the validation's Data Docs page, else of the Data Docs index."""
    for site in context.get_docs_sites_urls(resource_identifier=result_id, site_names=[SITE]):
        url = site.get("site_url")
        if url and url.startswith("file://"):
            page = Path(unquote(urlparse(url).path))
            if page.is_file():
                return str(page)
    return str(data_docs_index())


def validate(
    config: PipelineConfig, batch_id: int, stage: str, frame: DataFrame | pd.DataFrame, expected_rows: int
) -> tuple[ExpectationSuiteValidationResult, str, str]:
    """Run the pipeline's checkpoint on `frame`, a Spark or a pandas frame: (suite result, result
    identifier, report path)."""
    with quiet_gx():
        import great_expectations as gx
        from great_expectations.checkpoint import UpdateDataDocsAction
        from great_expectations.core.run_identifier import RunIdentifier

    suite = build_suite(config)  # outside the lock: a ConfigError needs no GX files
    root = gx_root()
    with gx_lock(root), quiet_gx():
        context = open_context(root)
        suite = context.suites.add_or_update(suite)
        source = DATASOURCE if hasattr(frame, "sparkSession") else PANDAS_DATASOURCE
        data = context.data_sources.get(source).get_asset(ASSET).get_batch_definition(BATCH_DEFINITION)
        name = f"{config.name}.{stage}"
        definition = context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=name, data=data, suite=suite)
        )
        checkpoint = context.checkpoints.add_or_update(
            gx.Checkpoint(
                name=name,
                validation_definitions=[definition],
                actions=[UpdateDataDocsAction(name="update_data_docs", site_names=[SITE])],
                result_format=RESULT_FORMAT,
            )
        )
        run_id = RunIdentifier(run_name=f"{config.name}-batch-{batch_id}-{stage}")
        outcome = checkpoint.run(
            batch_parameters={"dataframe": frame},
            expectation_parameters={EXPECTED_ROWS: expected_rows},
            run_id=run_id,
        )
        ((result_id, result),) = outcome.run_results.items()
        return result, str(result_id), _report_path(context, result_id)

"""The Great Expectations file context of a state folder, and one checkpoint run on a frame.

The context lives at <state folder>/gx; its config comes from expectations/great_expectations.yml
(copied when it changed, never written back) and is cached per process. One GX run at a time per
state folder touches GX's files at a time (a file lock, `gx_lock`): Data Docs, suites, checkpoints
and the config are files GX rewrites without locking. The validation itself runs outside the lock,
so the gates and audits of several pipelines compute at once; the lock is waited for at most
``EOS_GX_LOCK_TIMEOUT_S`` seconds (120 by default), then GxLockTimeoutError names the lock file.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from eos_ingest import paths
from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.errors import ConfigError, GxLockTimeoutError
from eos_ingest.quality.gx_import import import_gx, quiet_gx
from eos_ingest.quality.suite import EXPECTED_ROWS, build_suite

if TYPE_CHECKING:
    import pandas as pd
    from great_expectations.core import ExpectationSuiteValidationResult
    from great_expectations.data_context import AbstractDataContext
    from pyspark.sql import DataFrame

__all__ = ["data_docs_index", "gx_lock", "gx_root", "lock_timeout_s", "open_context", "validate"]

GX_TEMPLATE = paths.GX_TEMPLATE  # expectations/great_expectations.yml (shipped in the wheel)
DATASOURCE, ASSET, BATCH_DEFINITION = "eos_spark", "batch_rows", "whole_frame"  # declared in the yml
# The audit's rows come as a pandas frame (read with delta-rs): the same asset on a pandas source.
PANDAS_DATASOURCE = "eos_pandas"
SITE = "local_site"
# SUMMARY keeps a few unexpected values per expectation: enough to name the offending rows,
# small enough to store on the batch row.
RESULT_FORMAT: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": 5}
LOCK_TIMEOUT_ENV, LOCK_TIMEOUT_S = "EOS_GX_LOCK_TIMEOUT_S", 120.0
_LOCK_POLL_S = 0.1

_contexts: dict[Path, AbstractDataContext] = {}


def gx_root() -> Path:
    """The GX context's root: <state folder>/gx (config copy, suites, results, Data Docs)."""
    return paths.state_dir() / "gx"


def data_docs_index() -> Path:
    """The Data Docs home page (it lists the latest validations of every pipeline)."""
    return gx_root() / "data_docs" / "index.html"


def lock_timeout_s() -> float:
    """How long to wait for the GX lock: $EOS_GX_LOCK_TIMEOUT_S, else 120 s. The lock is held for a
    Data Docs build (seconds), so a longer wait means a stuck holder, not a busy one."""
    raw = os.environ.get(LOCK_TIMEOUT_ENV, "").strip()
    if not raw:
        return LOCK_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ConfigError(f"{LOCK_TIMEOUT_ENV}={raw!r} is not valid; give the seconds to wait, e.g. 120")
    return value


@contextmanager
def gx_lock(root: Path, timeout_s: float | None = None) -> Iterator[None]:
    """Hold the state folder's GX lock while GX reads or writes its shared files (the Data Docs
    index, suites, validation definitions, checkpoints): GX rewrites them without locking, and
    several tasks may validate at once. Waits at most `timeout_s` (lock_timeout_s()), then raises
    GxLockTimeoutError naming the lock file. Never hold it across a validation's computation."""
    wait = lock_timeout_s() if timeout_s is None else timeout_s
    root.mkdir(parents=True, exist_ok=True)
    path = root / ".lock"
    with path.open("a") as handle:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise GxLockTimeoutError(
                        f"the Great Expectations lock {path} is held by another process for over "
                        f"{wait:g} s (it is held only while GX writes its files, normally seconds); "
                        f"find the holder with `fuser -v {path}`, let it finish or stop it, then run "
                        f"again; {LOCK_TIMEOUT_ENV} sets the wait"
                    ) from None
                time.sleep(_LOCK_POLL_S)
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
    template = paths.shipped_text(paths.GX_TEMPLATE)
    changed = not config_file.exists() or config_file.read_text(encoding="utf-8") != template
    if changed:
        partial = root / f".great_expectations.yml.{os.getpid()}"
        partial.write_text(template, encoding="utf-8")
        os.replace(partial, config_file)
    if changed or root not in _contexts:
        import_gx()
        with quiet_gx():
            import great_expectations as gx  # noqa: PLC0415 GX after gx_import.import_gx

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
    """Validate `frame`, a Spark or a pandas frame, with the pipeline's suite, store the result and
    its Data Docs page, as the pipeline's checkpoint does: (suite result, result identifier, report
    path). Only the file steps hold gx_lock; the validation itself runs unlocked."""
    import_gx()
    with quiet_gx():
        import great_expectations as gx  # noqa: PLC0415 GX after gx_import.import_gx
        from great_expectations.checkpoint import UpdateDataDocsAction  # noqa: PLC0415 GX after gx_import.import_gx
        from great_expectations.constants import DATAFRAME_REPLACEMENT_STR  # noqa: PLC0415 GX after gx_import.import_gx
        from great_expectations.core.run_identifier import RunIdentifier  # noqa: PLC0415 GX after gx_import.import_gx
        from great_expectations.data_context.types.resource_identifiers import (  # noqa: PLC0415 GX after gx_import.import_gx
            ExpectationSuiteIdentifier,
            ValidationResultIdentifier,
        )
        from great_expectations.validator.v1_validator import Validator  # noqa: PLC0415 GX after gx_import.import_gx

    if hasattr(frame, "sparkSession"):
        from great_expectations.compatibility import pyspark as gx_pyspark  # noqa: PLC0415 GX after gx_import.import_gx

        if not gx_pyspark.pyspark:  # GX was imported before pyspark (gx_import.import_gx)
            raise RuntimeError(
                "GX was imported in this process before pyspark, so it cannot validate a Spark frame: "
                "import pyspark before the first GX call"
            )
    suite = build_suite(config)  # outside the lock: a ConfigError needs no GX files
    root = gx_root()
    name = f"{config.name}.{stage}"
    # 1. Under the lock, briefly: the config, the suite, the validation definition and the
    # checkpoint (kept, so `checkpoint.run()` by hand gives the same validation).
    with gx_lock(root), quiet_gx():
        context = open_context(root)
        suite = context.suites.add_or_update(suite)
        source = DATASOURCE if hasattr(frame, "sparkSession") else PANDAS_DATASOURCE
        data = context.data_sources.get(source).get_asset(ASSET).get_batch_definition(BATCH_DEFINITION)
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
    # 2. Unlocked: the validation, what costs (Spark jobs or pandas over the batch). It reads the
    # in-memory frame and suite only, as ValidationDefinition.run does before it stores.
    run_id = RunIdentifier(run_name=f"{config.name}-batch-{batch_id}-{stage}")
    with quiet_gx():
        validator = Validator(data, RESULT_FORMAT, {"dataframe": frame})
        result: ExpectationSuiteValidationResult = validator.validate_expectation_suite(
            suite, expectation_parameters={EXPECTED_ROWS: expected_rows}
        )
    # The meta ValidationDefinition.run adds before it stores (the Data Docs page shows it).
    result.meta["validation_id"] = definition.id
    result.meta["checkpoint_id"] = checkpoint.id
    result.meta["run_id"] = run_id
    result.meta["validation_time"] = run_id.run_time
    result.meta["batch_parameters"] = {"dataframe": DATAFRAME_REPLACEMENT_STR}
    suite_id = ExpectationSuiteIdentifier(name=suite.name)
    result_id = ValidationResultIdentifier(
        expectation_suite_identifier=suite_id, run_id=run_id, batch_identifier=validator.active_batch_id
    )
    # 3. Under the lock again: the result file and the Data Docs (the index page is shared).
    with gx_lock(root), quiet_gx():
        context.validation_results_store.store_validation_results(
            suite_validation_result=result,
            suite_validation_result_identifier=result_id,
            expectation_suite_identifier=suite_id,
        )
        # Both pages, as GX's UpdateDataDocsAction asks for them (its hint wants one kind per list).
        pages: Any = [result_id, suite_id]
        context.build_data_docs(site_names=[SITE], resource_identifiers=pages)
        return result, str(result_id), _report_path(context, result_id)

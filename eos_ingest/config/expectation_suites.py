"""`expectations_suite:` -- a Great Expectations suite of the deployment's expectations folder, by name.

The folder is ``$EOS_EXPECTATIONS_DIR``, else ``expectations/`` beside the pipelines folder (a
checkout's top-level ``expectations/``; docker-compose.yaml mounts it beside ``pipelines/``). A suite
``orders`` is ``<folder>/suites/orders.json``, in GX's own suite JSON (what a GX file context over
the folder reads and writes). spark-submit ships the file beside the pipeline file (spark/submit.py),
where the job's driver finds it when the folder is not there.

The file is read and checked when the pipeline loads (the DAG parse, `eos-ingest plan`): one that
is missing or does not parse refuses the pipeline, naming the file and the fix.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from eos_ingest.config import expectation_types as gx_types
from eos_ingest.config.checks import problem

EXPECTATIONS_DIR_ENV = "EOS_EXPECTATIONS_DIR"
SUITE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def expectations_dir(pipelines_folder: Path) -> Path:
    """The deployment's suites folder: $EOS_EXPECTATIONS_DIR, else expectations/ beside the pipelines."""
    return Path(os.environ.get(EXPECTATIONS_DIR_ENV) or pipelines_folder.parent / "expectations")


def suite_file(name: str, pipelines_folder: Path) -> Path:
    """Where suite `name` is: in the expectations folder, else beside the pipeline file (shipped)."""
    found = expectations_dir(pipelines_folder) / "suites" / f"{name}.json"
    beside = pipelines_folder / f"{name}.json"
    return beside if not found.is_file() and beside.is_file() else found


def checked_suite_file(value: Any, pipelines_folder: Path) -> Path:
    """The file of the suite named `value`, read and checked; a problem names the file and the fix."""
    if not (isinstance(value, str) and SUITE_NAME.fullmatch(value)):
        raise problem("give the name of a suite of the expectations folder, e.g. orders")
    file = suite_file(value, pipelines_folder).resolve()
    folder = expectations_dir(pipelines_folder)
    if not file.is_file():
        raise problem(
            f"no suite file {file}; write it there (GX suite JSON, e.g. a copy of the package's "
            f"eos_default.json), or set ${EXPECTATIONS_DIR_ENV} to the folder holding suites/{value}.json"
            f" (now {folder})"
        )
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise problem(f"{file} does not parse as JSON ({exc}); fix the file (GX suite JSON)") from None
    fault = _suite_fault(doc, value)
    if fault:
        raise problem(f"{file}: {fault}")
    return file


def _suite_fault(doc: Any, name: str) -> str | None:
    """What makes `doc` not a GX suite named `name` whose expectations this GX knows, or None."""
    if not isinstance(doc, dict) or not isinstance(doc.get("expectations"), list):
        return 'not a GX suite: give a JSON object with "name" and an "expectations" list'
    if doc.get("name") != name:
        return f'its "name" is {doc.get("name")!r}; set it to {name!r}, the file name'
    for i, item in enumerate(doc["expectations"]):
        if not (isinstance(item, dict) and isinstance(item.get("kwargs", {}), dict)):
            return f'expectations[{i}] is not an object with "type" and "kwargs"; fix it'
        flat = {k: v for k, v in item.items() if k not in ("kwargs", "id", "rendered_content")}
        found = gx_types.check_expectation({**flat, **item.get("kwargs", {})})
        if found:
            field, value, fix = found
            return f"expectations[{i}].{field} = {value!r}: {fix}"
    return None

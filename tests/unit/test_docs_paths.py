"""Every module path the docs name in backticks is one in the code (issue 49, item 6).

A backticked dotted name in README.md or docs/**/*.md (fenced blocks aside) is a path of the code
when it starts with `eos_ingest.`, `bench.` or `tests.`, or when its first name is a folder or a
module of eos_ingest (`batch.sequence.run_fenced`, `operations.plan_batch`), or a module of the flat
layout the package left (`kafka_offsets`, `batch_sequence`: a folder's name, an underscore, more).
A short path is read from eos_ingest's root: `operations.plan_batch` does not resolve, since the
module is `service.operations`; `batch_sequence.run_fenced` never does. A path resolves when its
leading names are a module's file (or a package's `__init__.py`) and the names after them are
defined there: a def, a class, an assignment or an import, then a name in that class. Read from
the source with ast, nothing imported: no Spark, no GX.

Not paths, though their first name is a module's or a folder's: file names (`quality.md`), the keys
of a pipeline file (`value.schema_evolution`, from the config model), Spark's settings and
Airflow's own names (`spark.` or `airflow.` then no module of that folder), and NOT_PATHS.
"""

from __future__ import annotations

import ast
import re
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from eos_ingest.config.model import PipelineConfig

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "eos_ingest"
ROOTS = {"eos_ingest": PACKAGE, "bench": REPO / "bench", "tests": REPO / "tests"}
# Folders of eos_ingest that share their name with another project's namespace: a span naming
# no module of the folder after them is that project's (`spark.sql.shuffle.partitions`).
SHARED_NAMESPACES = ("spark", "airflow")
FILE_SUFFIXES = {"md", "py", "sh", "yaml", "yml", "json", "toml", "txt", "in", "lock", "html", "tsx",
                 "Dockerfile", "dockerignore"}  # fmt: skip

# Named like a module path, and something else.
NOT_PATHS = {
    "eos_ingest.librdkafka": "the logger librdkafka's lines go to (docs/operations.md)",
    "kafka.net": "kafka-python's package (docs/upstream/)",
    'context.suites.get("orders")': "GX's data context (docs/quality.md)",
    "trends.lag": "a key of the pipeline page's JSON (docs/ui.md)",
    "trends.batches": "a key of the pipeline page's JSON (docs/ui.md)",
}

SPAN = re.compile(r"`([^`\n]+)`")
FENCED = re.compile(r"^```.*?^```", re.S | re.M)
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.(?:[A-Za-z_]\w*|\*))+(?:\([^()]*\))?")  # a call's arguments too


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def dotted_spans(text: str) -> list[str]:
    """The backticked dotted names of a Markdown text, outside fenced blocks."""
    return [span for span in SPAN.findall(FENCED.sub("", text)) if DOTTED.fullmatch(span)]


def _models(annotation: object) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for argument in typing.get_args(annotation):
        yield from _models(argument)


def key_paths(model: type[BaseModel] = PipelineConfig, prefix: str = "") -> set[str]:
    """Every key path of a pipeline file: `output`, `output.catalog`, `output.catalog.conn_id`, ..."""
    found = set()
    for name, field in model.model_fields.items():
        path = prefix + (field.alias or name)
        found.add(path)
        for section in _models(field.annotation):
            found |= key_paths(section, path + ".")
    return found


def package_names() -> tuple[set[str], set[str]]:
    """eos_ingest's folders and its modules' names, at any depth."""
    folders = {p.parent.name for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE}
    modules = {p.stem for p in PACKAGE.rglob("*.py") if p.stem != "__init__"}
    return folders, modules


FOLDERS, MODULES = package_names()
KEYS = key_paths()


def is_code_path(span: str) -> bool:
    parts = span.split("(")[0].split(".")
    first = parts[0]
    if span in NOT_PATHS or parts[-1] in FILE_SUFFIXES or span in KEYS:
        return False
    if first in ROOTS:
        return True
    if first in SHARED_NAMESPACES:
        folder = PACKAGE / first
        return (folder / f"{parts[1]}.py").is_file() or (folder / parts[1]).is_dir()
    folder, underscore, rest = first.partition("_")
    return first in FOLDERS or first in MODULES or bool(underscore and rest and folder in FOLDERS)


def _defined(scope: list[ast.stmt], name: str) -> ast.stmt | None:
    """The statement of `scope` (a module's or a class's body, with its ifs and trys) defining `name`."""
    for node in scope:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return node
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if name in names:
                return node
        if isinstance(node, ast.Import | ast.ImportFrom) and name in {
            (a.asname or a.name).split(".")[0] for a in node.names
        }:
            return node
        if isinstance(node, ast.If | ast.Try):
            inner = [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
            for handler in getattr(node, "handlers", []):
                inner += handler.body
            if (found := _defined(inner, name)) is not None:
                return found
    return None


def resolves(span: str) -> bool:
    """Whether `span` names a module of the code and, after it, names defined in that module."""
    names = [n for n in span.split("(")[0].split(".") if n != "*"]
    here = ROOTS.get(names[0], PACKAGE)
    names = names[1:] if names[0] in ROOTS else names
    while names and (here / names[0]).is_dir():
        here, names = here / names[0], names[1:]
    if names and (here / f"{names[0]}.py").is_file():
        module, names = here / f"{names[0]}.py", names[1:]
    else:
        module = here / "__init__.py"
    if not module.is_file():
        return False
    scope: list[ast.stmt] | None = ast.parse(module.read_text(encoding="utf-8")).body
    for name in names:
        if scope is None:  # a name inside a function or a value: not followed further
            return True
        node = _defined(scope, name)
        if node is None:
            return False
        scope = node.body if isinstance(node, ast.ClassDef) else None
    return True


@pytest.mark.parametrize(
    ("span", "path", "resolved"),
    [
        ("eos_ingest.batch.sequence.run_fenced", True, True),
        ("batch.sequence.run_fenced", True, True),
        ("service.operations.plan_batch", True, True),
        ("batch.attempt.BatchAttempt.commit", True, True),
        ("quality.gate.warm_up()", True, True),
        ("quality.suite.pipeline_expectations(config)", True, True),
        ("spark.submit.job_conf", True, True),
        ("bench.table_growth", True, True),
        ("operations.plan_batch", True, False),  # the module is service.operations
        ("sequence.run_fenced", True, False),
        ("kafka_offsets.fetch_snapshot", True, False),  # the flat layout's module
        ("batch_sequence.*", True, False),
        ("batch.attempt.BatchAttempt.no_such_step", True, False),
        ("value.schema_evolution", False, None),  # a pipeline file's key
        ("output.catalog.conn_id", False, None),
        ("spark.sql.shuffle.partitions", False, None),  # Spark's setting
        ("airflow.plugins", False, None),  # Airflow's entry point group
        ("quality.md", False, None),
        ("bootstrap.servers", False, None),
    ],
)
def test_what_counts_as_a_path_of_the_code_and_what_resolves(
    span: str, path: bool, resolved: bool | None
) -> None:
    assert is_code_path(span) is path
    if resolved is not None:
        assert resolves(span) is resolved


def test_every_path_of_the_code_in_the_docs_resolves() -> None:
    broken = [
        f"{file.relative_to(REPO)}: `{span}`"
        for file in doc_files()
        for span in dotted_spans(file.read_text(encoding="utf-8"))
        if is_code_path(span) and not resolves(span)
    ]
    assert not broken, (
        "paths that name no module or name of the code (write them from eos_ingest's root):\n"
        + ("\n".join(broken))
    )


def test_every_exception_is_still_in_the_docs() -> None:
    spans = {span for file in doc_files() for span in dotted_spans(file.read_text(encoding="utf-8"))}
    assert set(NOT_PATHS) <= spans, set(NOT_PATHS) - spans

"""The wheel declares what it imports: every third-party module the package imports is a distribution
pyproject.toml names, so `pip install eos_ingest-*.whl` without the lock brings it.

A module-level import (outside functions and `if TYPE_CHECKING:`) must be in `[project]
dependencies`: it runs whenever the module loads. An import inside a function may instead be in an
extra, and then raises a MissingExtraError naming it (eos_ingest/extras.py). eos_ingest.airflow is
the Airflow adapter, which only Airflow loads (the DAG files, the plugin's entry point) and no other
folder imports (lint-imports' layers): its module-level imports count as lazy, so an extra may hold
them. A module maps to the distributions that ship the longest prefix of its dotted name, so
`airflow.providers.common.compat` is apache-airflow-providers-common-compat, not Airflow's core.

Not declaring what it imports is how `eos-ingest plan` failed in a fresh venv with `No module named
'pyarrow'` (deltalake 1.x makes pyarrow optional; the lock and the Airflow image had it).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from functools import cache
from importlib.metadata import distribution, packages_distributions

from eos_ingest import paths
from tests.helpers.dependencies import declared, distribution_name

# Subpackages that only a host loads, with the extra that brings that host's pieces.
HOSTED = {"eos_ingest.airflow": "airflow"}


def imports(tree: ast.Module) -> Iterator[tuple[str, int, bool]]:
    """(dotted module, line, module-level) for each absolute import of a module's source."""

    def walk(node: ast.AST, lazy: bool) -> Iterator[tuple[str, int, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                yield from ((alias.name, child.lineno, not lazy) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                yield child.module, child.lineno, not lazy
            type_checking = isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
            if not type_checking:  # never imported at run time
                function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                yield from walk(child, lazy or function)

    yield from walk(tree, False)


def third_party(root: str) -> bool:
    return root not in sys.stdlib_module_names and root not in ("eos_ingest", "__future__")


@cache
def _distributions() -> dict[str, list[str]]:
    return packages_distributions()


@cache
def _files(dist: str) -> frozenset[str]:
    return frozenset(str(f) for f in distribution(dist).files or ())


def owners(module: str) -> set[str]:
    """The distributions that ship the longest prefix of module's dotted name."""
    found = _distributions().get(module.split(".")[0], [])
    parts = module.split(".")
    for depth in range(len(parts), 0, -1):
        path = "/".join(parts[:depth])
        holders = {
            distribution_name(d)
            for d in found
            if any(f.startswith(f"{path}/") or f == f"{path}.py" for f in _files(d))
        }
        if holders:
            return holders
    return {distribution_name(d) for d in found}


def undeclared(sources: dict[str, str], dependencies: set[str], extras: dict[str, set[str]]) -> list[str]:
    """Each third-party import of sources (module name -> source) that no declaration covers."""
    in_extras = set().union(*extras.values())
    wrong = []
    for module, source in sorted(sources.items()):
        hosted = next((extra for prefix, extra in HOSTED.items() if module.startswith(prefix)), None)
        for imported, line, top in imports(ast.parse(source)):
            if not third_party(imported.split(".")[0]):
                continue
            dists = owners(imported)
            if not top:
                allowed, where = dependencies | in_extras, "dependencies or an extra"
            elif hosted:
                allowed, where = dependencies | extras.get(hosted, set()), f"dependencies or [{hosted}]"
            else:
                allowed, where = dependencies, "[project] dependencies"
            if not dists & allowed:
                shipped = ", ".join(sorted(dists)) or "no installed distribution"
                wrong.append(f"{module}:{line} imports {imported} ({shipped}): not in {where}")
    return wrong


def package_sources() -> dict[str, str]:
    found = {}
    for file in sorted(paths.PACKAGE_DIR.rglob("*.py")):
        relative = file.relative_to(paths.PACKAGE_DIR.parent).with_suffix("")
        found[".".join(relative.parts).removesuffix(".__init__")] = file.read_text()
    return found


def test_every_third_party_import_of_the_package_is_a_declared_dependency() -> None:
    dependencies, extras = declared()
    wrong = undeclared(package_sources(), dependencies, extras)
    assert not wrong, "\n".join(wrong)


def test_a_module_level_import_of_a_dependency_of_a_dependency_is_found() -> None:
    """What the check saw on the code of issue 51: pyarrow is only deltalake's optional dependency."""
    source = "import pyarrow as pa\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pandas\n"
    wrong = undeclared({"eos_ingest.storage.batch_rows": source}, {"deltalake"}, {})
    assert wrong == [
        "eos_ingest.storage.batch_rows:1 imports pyarrow (pyarrow): not in [project] dependencies"
    ]


def test_a_lazy_import_may_be_an_extras_and_a_module_level_one_may_not() -> None:
    lazy = "def read():\n    from pyiceberg.table import StaticTable\n"
    assert undeclared({"eos_ingest.storage.x": lazy}, set(), {"iceberg": {"pyiceberg"}}) == []
    top = "from pyiceberg.table import StaticTable\n"
    assert undeclared({"eos_ingest.storage.x": top}, set(), {"iceberg": {"pyiceberg"}}) != []


def test_the_airflow_adapter_may_import_its_extras_airflow_at_module_level() -> None:
    source = "from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator\n"
    spark = {"apache-airflow-providers-apache-spark"}
    assert undeclared({"eos_ingest.airflow.operator": source}, set(), {"airflow": spark}) == []
    # Elsewhere, or in another extra than the adapter's, it would not load in a plain install.
    assert undeclared({"eos_ingest.service.x": source}, set(), {"airflow": spark}) != []
    assert undeclared({"eos_ingest.airflow.operator": source}, set(), {"lineage": spark}) != []


def test_a_provider_maps_to_its_own_distribution_not_to_airflow() -> None:
    assert owners("airflow.providers.common.compat.openlineage.facet") == {
        "apache-airflow-providers-common-compat"
    }
    assert owners("pyarrow.compute") == {"pyarrow"}


def test_nothing_outside_the_adapter_imports_it_at_module_level() -> None:
    for module, source in package_sources().items():
        if not module.startswith(tuple(HOSTED)):
            hosted = [i for i, _, top in imports(ast.parse(source)) if top and i.startswith(tuple(HOSTED))]
            assert hosted == [], (module, hosted)

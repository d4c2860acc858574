"""The tests mirror the package: every folder of tests/unit/ and tests/integration/ is named for the
eos_ingest package it tests (tests/unit/kafka/ for eos_ingest/kafka/, a subfolder for a
subpackage), or for a top-level folder of the repository that is not the package (bench/, stack/);
each is a Python package, so two test files of one name (a unit and an integration
test_avro_key.py) stay two modules. A test file imports no other test file: what tests share is in
tests/helpers/ (plain helpers) or tests/fixtures/ (pytest fixtures)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
PACKAGE = REPO / "eos_ingest"


def folders_of_tests() -> list[Path]:
    return sorted(
        folder
        for kind in ("unit", "integration")
        for folder in (TESTS / kind).rglob("*")
        if folder.is_dir() and folder.name != "__pycache__"
    )


def package_of(folder: Path) -> Path | None:
    """The package, or the repository's top-level folder, that a tests/<kind>/... folder is named for."""
    parts = folder.relative_to(TESTS).parts[1:]
    if (PACKAGE.joinpath(*parts) / "__init__.py").is_file():
        return PACKAGE.joinpath(*parts)
    top = REPO.joinpath(*parts)
    return top if parts[0] not in {"eos_ingest", "tests"} and top.is_dir() else None


@pytest.mark.parametrize("folder", folders_of_tests(), ids=lambda f: str(f.relative_to(TESTS)))
def test_each_test_folder_is_named_for_a_package_or_a_top_level_folder(folder: Path) -> None:
    assert package_of(folder) is not None, (
        f"{folder.relative_to(REPO)} is named for no eos_ingest package and no top-level folder: "
        "name it for the package its tests test (or move them where that package's tests are)"
    )
    assert (folder / "__init__.py").is_file(), f"{folder.relative_to(REPO)} has no __init__.py"


def test_no_test_file_imports_another_test_file() -> None:
    found = []
    for file in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if module and module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith("test_"):
                found.append(f"{file.relative_to(REPO)}:{node.lineno}: from {module}")
    assert not found, "move what they share to tests/helpers/:\n" + "\n".join(found)

"""Every module at storage/'s top but the registry of formats is under the import-linter contract
that keeps the shared level off storage/delta and storage/iceberg (pyproject.toml): a new shared
module cannot slip past it."""

from __future__ import annotations

import tomllib

from eos_ingest.paths import PACKAGE_DIR, REPO_ROOT

# The registry names the formats' implementations, so it imports both (its module docstring).
REGISTRY = "table_formats"


def test_the_contract_of_the_shared_level_lists_every_shared_module() -> None:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = {c["name"]: c for c in config["tool"]["importlinter"]["contracts"]}
    shared = contracts["storage's shared modules import no table format"]

    on_disk = {
        f"eos_ingest.storage.{path.stem}"
        for path in (PACKAGE_DIR / "storage").glob("*.py")
        if path.stem not in ("__init__", REGISTRY)
    }

    assert sorted(shared["source_modules"]) == sorted(on_disk)
    assert shared["forbidden_modules"] == ["eos_ingest.storage.delta", "eos_ingest.storage.iceberg"]

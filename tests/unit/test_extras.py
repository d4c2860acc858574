"""Without an extra, what needs it fails with the extra's name and the pip command (eos_ingest/extras.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.control.engine import TransactionRunner
from eos_ingest.errors import MissingExtraError
from eos_ingest.extras import EXTRAS, needs_extra
from eos_ingest.storage.iceberg.catalog import IcebergCatalog
from eos_ingest.storage.iceberg.reader import IcebergReader
from eos_ingest.storage.table_names import TABLE
from tests.helpers.dependencies import declared


def test_a_missing_module_of_the_extra_names_the_extra_and_the_pip_command() -> None:
    with pytest.raises(MissingExtraError) as raised, needs_extra("iceberg", "reading an Iceberg table"):
        raise ModuleNotFoundError("No module named 'pyiceberg'", name="pyiceberg.catalog")
    assert "pip install 'eos-ingest[iceberg]'" in str(raised.value)
    assert "reading an Iceberg table needs the module 'pyiceberg.catalog'" in str(raised.value)
    assert not raised.value.retriable


def test_a_missing_module_of_something_else_is_not_the_extras() -> None:
    with pytest.raises(ModuleNotFoundError) as raised, needs_extra("iceberg", "reading an Iceberg table"):
        raise ModuleNotFoundError("No module named 'pyarrow'", name="pyarrow")
    assert not isinstance(raised.value, MissingExtraError)


def test_every_extra_named_here_is_one_of_pyprojects() -> None:
    assert set(EXTRAS) <= set(declared()[1])


def test_an_iceberg_read_without_pyiceberg_names_the_iceberg_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "pyiceberg.catalog.sql", None)  # import raises ModuleNotFoundError
    monkeypatch.setitem(sys.modules, "pyiceberg.table", None)
    catalog = IcebergCatalog("eos_lake", f"sqlite:///{tmp_path}/control.db", str(tmp_path / "wh"))
    with pytest.raises(MissingExtraError, match=r"pip install 'eos-ingest\[iceberg\]'"):
        catalog.pyiceberg()
    with pytest.raises(MissingExtraError, match=r"pip install 'eos-ingest\[iceberg\]'"):
        catalog.pyiceberg_at("ns.t", str(tmp_path / "wh" / "v1.metadata.json"))


def test_verify_of_an_iceberg_pipeline_without_pyiceberg_names_the_iceberg_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The reader verify and the audit open first: before, a bare No module named 'pyiceberg'."""
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("EOS_CONTROL_DB_URL", raising=False)
    monkeypatch.setitem(sys.modules, "pyiceberg.exceptions", None)
    output = {"format": "iceberg", "table": "events.orders"}
    doc = {"name": "orders", "topics": ["orders"], "value": {"format": "raw"}, "output": output}
    (tmp_path / "orders.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(MissingExtraError, match=r"pip install 'eos-ingest\[iceberg\]'"):
        IcebergReader(load_pipeline(tmp_path / "orders.yaml")).open(TABLE)


def test_a_postgresql_control_db_without_psycopg_names_the_postgres_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'eos-ingest\[postgres\]'") as raised:
        TransactionRunner("postgresql+psycopg://eos:secret@db/control", 1, 0.1, 5)
    assert "secret" not in str(raised.value)

"""(i) and (j) of make bench (bench/iceberg_systems.py): what a run keeps of its table's
comparison with Kafka's read_committed view, and the sink created through a running worker's REST
API with the same settings its properties file has."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import iceberg_systems
from bench.iceberg_connect.worker import ConnectWorker, SinkConfig


def test_a_run_keeps_the_duplicate_missing_and_unexpected_counts_of_its_table() -> None:
    counts = {"rows": 12, "duplicates": 2, "missing": 1, "unexpected": 0}
    assert iceberg_systems.table_figures(counts) == {"duplicates": 2, "missing": 1, "unexpected": 0}


@pytest.mark.parametrize("wrong", ["duplicates", "missing", "unexpected"])
def test_a_table_with_any_wrong_record_fails_its_run(wrong: str) -> None:
    counts = {"rows": 10, "duplicates": 0, "missing": 0, "unexpected": 0, wrong: 3}
    with pytest.raises(RuntimeError, match=f"\\(j\\) .*'{wrong}': 3"):
        iceberg_systems.refuse_unless_exactly_once("j", counts)


def test_an_exact_table_passes() -> None:
    iceberg_systems.refuse_unless_exactly_once(
        "i", {"rows": 10, "duplicates": 0, "missing": 0, "unexpected": 0}
    )


def test_the_connector_created_over_rest_has_the_settings_of_its_properties_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = SinkConfig("127.0.0.1:9092", "events", "bench_x", tmp_path, commit_interval_ms=500)
    worker = ConnectWorker(config, tmp_path / "jars", rest_port=8083)
    sent: list[tuple[str, str, Any]] = []
    monkeypatch.setattr(worker, "rest", lambda method, path, body=None: sent.append((method, path, body)))

    worker.create_connector()

    ((method, path, body),) = sent
    assert (method, path, body["name"]) == ("POST", "/connectors", "bench_x")
    from_file = dict(line.split("=", 1) for line in (tmp_path / "sink.properties").read_text().splitlines())
    assert body["config"] == from_file
    assert from_file["iceberg.control.commit.interval-ms"] == "500"
    assert from_file["iceberg.tables"] == "bench.bench_x"

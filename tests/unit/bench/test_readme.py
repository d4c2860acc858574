"""bench/README.md keeps the last run of every system as its main table; a later run of fewer
systems (--systems) is shown beside it, not instead of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import side_by_side


def result(stamp: str, systems: str) -> dict:
    return {"file": f"bench-{stamp}.json", "date": stamp, "mode": "full", "systems": systems}


def test_a_run_of_fewer_systems_does_not_replace_the_complete_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for doc in (result("20261125T100000Z", "abcdefgh"), result("20261125T160000Z", "bdef")):
        (tmp_path / doc["file"]).write_text(json.dumps(doc))
    monkeypatch.setattr(side_by_side, "RESULTS", tmp_path)

    assert side_by_side.latest("full", complete=True)["date"] == "20261125T100000Z"
    assert side_by_side.latest("full", complete=False)["date"] == "20261125T160000Z"
    assert side_by_side.latest("full")["date"] == "20261125T160000Z"
    assert side_by_side.latest("small") is None


def test_a_run_of_the_iceberg_systems_only_is_shown_beside_the_complete_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (i) and (j) came after the last complete run of (a)-(h): that one stays the main table.
    docs = (
        result("20261125T100000Z", "abcdefgh"),
        result("20261207T100000Z", "ij"),
    )
    for doc in docs:
        (tmp_path / doc["file"]).write_text(json.dumps(doc))
    monkeypatch.setattr(side_by_side, "RESULTS", tmp_path)

    assert side_by_side.latest("full", complete=True)["date"] == "20261125T100000Z"
    assert side_by_side.latest("full", complete=False)["date"] == "20261207T100000Z"

    (tmp_path / "bench-20261208T100000Z.json").write_text(
        json.dumps(result("20261208T100000Z", "abcdefghij"))
    )
    assert side_by_side.latest("full", complete=True)["date"] == "20261208T100000Z"

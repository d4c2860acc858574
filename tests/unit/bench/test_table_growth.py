"""The pure helpers of bench/table_growth.py (no broker, no Spark)."""

from __future__ import annotations

import pytest

from bench.table_growth import (
    check_checkpoints,
    last_json_object,
    parse_sizes,
    phase_seconds,
    size_ratio,
    summarize,
    vm_hwm_kb,
)


def test_parse_sizes_accepts_suffixes_and_sorts() -> None:
    assert parse_sizes("100,1,10") == [1, 10, 100]
    assert parse_sizes("5M, 500k") == [500_000, 5_000_000]
    assert parse_sizes("1_000,1000") == [1000]
    with pytest.raises(ValueError):
        parse_sizes("0")
    with pytest.raises(ValueError):
        parse_sizes(",")


def test_checkpoints_must_leave_room_for_the_measured_batches() -> None:
    check_checkpoints([1, 10, 100], 3)
    check_checkpoints([1, 3], 2)
    with pytest.raises(ValueError, match="too soon"):
        check_checkpoints([1, 3], 3)


def test_phase_seconds_names_each_span_by_its_start() -> None:
    marks = [
        (10.0, "start"),
        (10.5, "read"),
        (12.0, "gate"),
        (13.0, "write"),
        (16.0, "written"),
        (16.5, "committed"),
    ]
    assert phase_seconds(marks) == {"start": 0.5, "read": 1.5, "gate": 1.0, "write": 3.0, "written": 0.5}
    assert phase_seconds([]) == {}


def test_summarize_medians_and_ratios_over_the_first_checkpoint() -> None:
    summary = summarize({10: [2.0, 2.2, 9.0], 1: [2.0, 1.0, 3.0], 100: [2.4, 2.5, 2.3]})
    assert summary["median_s"] == {"1": 2.0, "10": 2.2, "100": 2.4}
    assert summary["ratio"] == {"1": 1.0, "10": 1.1, "100": 1.2}
    assert summary["last_ratio"] == 1.2
    assert summary["within_target"] is True
    assert summarize({1: [1.0], 100: [1.3]})["within_target"] is False
    assert summarize({})["last_ratio"] is None


def test_size_ratio() -> None:
    assert size_ratio(100, 150) == 1.5
    assert size_ratio(None, 150) is None
    assert size_ratio(0, 150) is None
    assert size_ratio(100, None) is None


def test_vm_hwm_and_the_cli_report() -> None:
    assert vm_hwm_kb("Name:\tpython\nVmPeak:\t  900 kB\nVmHWM:\t  123456 kB\nVmRSS:\t 1 kB\n") == 123456
    assert vm_hwm_kb("Name:\tzombie\n") is None
    out = 'noise {not json}\n{\n  "pipeline": "p",\n  "nested": {\n    "ok": 1\n  },\n  "ok": true\n}\n'
    assert last_json_object(out) == {"pipeline": "p", "nested": {"ok": 1}, "ok": True}

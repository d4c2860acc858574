"""The "Growth" section of bench/README.md, from the latest full runs of bench/table_growth.py
(results/table_growth.jsonl), bench/iceberg_growth.py (results/iceberg_growth.jsonl) and
bench/growth.py (results/growth.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"

# What each summary row of table_growth is, in the words of the targets.
_GROWTH_ROWS = {
    "replace_table": "Delta replace of the table",
    "replace_both": "both Delta replaces (table and quarantine)",
    "write_phase": "the job's write phase",
    "audit": "audit (read with delta-rs + GX validation)",
    "batch": "whole batch (read, gate, write, commit)",
}


def _last(path: Path, keep: Any) -> dict[str, Any] | None:
    if not path.exists():
        return None
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    chosen = [doc for doc in lines if keep(doc)]
    return chosen[-1] if chosen else None


def render() -> str:
    table = _last(RESULTS / "table_growth.jsonl", lambda d: not d.get("trial") and "growth" in d)
    memory = _last(RESULTS / "table_growth.jsonl", lambda d: not d.get("trial") and "memory" in d)
    control = _last(RESULTS / "growth.jsonl", lambda d: d.get("plan", {}).get("partitions", 0) >= 600)
    iceberg = _by_label(RESULTS / "iceberg_growth.jsonl")
    parts = [
        "### Growth (`python -m bench.table_growth`, `python -m bench.iceberg_growth`, `python -m bench.growth`)",
        "",
    ]
    if table is None and memory is None and control is None and not iceberg:
        return "\n".join([*parts, "No growth run yet.", ""])
    if table is not None:
        parts += _render_table_growth(table)
    if iceberg:
        parts += _render_iceberg_growth(iceberg)
    if memory is not None:
        parts += _render_memory(memory)
    if control is not None:
        parts += _render_control(control)
    return "\n".join(parts)


def _render_table_growth(doc: dict[str, Any]) -> list[str]:
    growth, params = doc["growth"], doc["parameters"]
    marks = [str(c) for c in params["checkpoints"]]
    lines = [
        f"`results/table_growth.jsonl` of {doc['date']} (commit {doc['commit']}; load average "
        f"{doc['load_before'][0]:.1f} before): batches of {params['batch_records']:,} records over "
        f"{params['partitions']} partitions, medians of {params['runs']}, in one Spark session. "
        "Target: flat, <= 1.2x from 1 to 100 batches in the table."
        + (f" Note: {doc['note']}." if doc.get("note") else ""),
        "",
        "| seconds, with N batches in the table | "
        + " | ".join(f"N={m}" for m in marks)
        + " | ratio | met |",
        "|---|" + "---:|" * (len(marks) + 1) + "---|",
    ]
    for key, label in _GROWTH_ROWS.items():
        row = growth["summary"].get(key)
        if row is None:
            continue
        cells = [f"{row['median_s'].get(m, float('nan')):.2f}" for m in marks]
        met = "yes" if row["within_target"] else "**no**"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {row['last_ratio']:.2f} | {met} |")
    return [*lines, ""]


def _by_label(path: Path) -> list[dict[str, Any]]:
    """The latest full run of each label (the code measured: before and after a change), in the
    order of their first runs."""
    if not path.exists():
        return []
    latest: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        doc = json.loads(line) if line.strip() else {}
        if doc and not doc.get("trial") and "growth" in doc:
            latest[doc.get("label") or doc["commit"]] = doc
    return list(latest.values())


def _render_iceberg_growth(docs: list[dict[str, Any]]) -> list[str]:
    params = docs[-1]["parameters"]
    marks = [str(c) for c in params["checkpoints"]]
    lines = [
        f"On Iceberg, `maintain` never run (`results/iceberg_growth.jsonl`): batches of "
        f"{params['batch_records']:,} records, medians of {params['runs']}, in one Spark session, the "
        "history between checkpoints filled through Iceberg's Java API (bench/iceberg_growth.py). "
        "Target: a whole batch <= 1.2x from 1 to 1,000 batches in the table. Each run's load average "
        "is the one before it: a whole batch's time follows the machine's load more than the table.",
        "",
        "| seconds, with N batches in the table | "
        + " | ".join(f"N={m}" for m in marks)
        + " | ratio | met |",
        "|---|" + "---:|" * (len(marks) + 1) + "---|",
    ]
    for doc in docs:
        what = f"{doc.get('label') or 'commit'} ({doc['commit']}, {doc['date'][:10]}, load {doc['load_before'][0]:.1f})"
        for key, label in (("batch", "whole batch"), ("write_phase", "its write phase")):
            row = doc["growth"]["summary"][key]
            cells = [f"{row['median_s'].get(m, float('nan')):.2f}" for m in marks]
            met = "yes" if row["within_target"] else "**no**"
            lines.append(
                f"| {label}, {what} | " + " | ".join(cells) + f" | {row['last_ratio']:.2f} | {met} |"
            )
    return [*lines, ""]


def _render_memory(doc: dict[str, Any]) -> list[str]:
    memory = doc["memory"]
    lines = [
        f"Peak memory (MB) against records, `results/table_growth.jsonl` of {doc['date']} (commit "
        f"{doc['commit']}); target: O(partitions), not O(records):",
        "",
        "| records committed | recount (Python) | verify (Python) | verify (JVM) | verify seconds |",
        "|---:|---:|---:|---:|---:|",
    ]
    for size in memory["sizes"]:
        recount, verify = size["recount"], size["verify"]
        lines.append(
            f"| {size['records_committed']:,} | {recount['peak_rss_mb']} | "
            f"{verify['peak_rss_python_mb']} | {verify['peak_rss_jvm_mb']} | {verify['seconds']} |"
        )
    ratio = memory["ratio_largest_over_smallest"]
    lines += [
        "",
        f"{ratio['records']:.0f}x the records: recount {ratio['recount_peak_rss']:.2f}x the memory, verify "
        f"{ratio['verify_peak_rss_python']:.2f}x (Python) and {ratio['verify_peak_rss_jvm']:.2f}x (JVM, "
        "whose heap grows until it collects; bounded by the driver memory).",
    ]
    return [*lines, ""]


def _render_control(doc: dict[str, Any]) -> list[str]:
    plan, status, dags = doc["plan"], doc["status"], doc["dag_folder"]
    return [
        f"`results/growth.jsonl` of {doc['date']} (load average {doc['load_before'][0]:.1f} before), "
        "medians:",
        "",
        "| what | measured | target |",
        "|---|---:|---|",
        f"| plan with {plan['partitions']} partitions | {plan['median_s']:.2f} s | < 2 s |",
        f"| `eos-ingest status` with {status['batches']:,} batches | {status['status_median_s']:.2f} s | < 1 s |",
        f"| Ingestion page with {status['batches']:,} batches | {status['page_median_s']:.2f} s | < 1 s |",
        f"| parsing the DAG folder with {dags['pipelines']} pipeline files | {dags['median_s']:.2f} s | < 2 s |",
        "",
    ]

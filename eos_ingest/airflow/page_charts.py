"""The pipeline page's charts, and the few formatters the page's tables share with them.

Five charts from the page's status (status.pipeline_status, with service/trends.py's history under
``trends``): the lag and the age of the oldest unread record over the last 24 hours, and the last
batches' duration, records written and records quarantined.

A chart's newest value is the one the page's tables show, from the same data and in the same
words: the lag charts end at the page's own reading of Kafka ("now": the status the partitions
table and its total row show), the batch charts at the newest batch that has the figure (its row
in the batches table); each caption shows that value through the formatter the templates use for
it (the filters num, age, unread, duration and ts are the functions below).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import markupsafe

from eos_ingest.airflow.svg_charts import Bar, Latest, TimePoint, bar_chart, time_chart

__all__ = ["age_text", "count_text", "duration_text", "pipeline_charts", "time_text", "unread_text"]

# A batch's bar takes its status's colour (base.html); any other value gets none.
STATUSES = frozenset({"planned", "committed", "failed", "abandoned"})


def count_text(value: float | None) -> str:
    """A count as the tables show it: 1,234; an em dash for none."""
    if value is None:
        return "\u2014"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.0f}"


def time_text(value: str | None) -> str:
    """An ISO timestamp (UTC) to the second: 2026-11-25 11:58:30 UTC."""
    return "\u2014" if value is None else value[:19].replace("T", " ") + " UTC"


def age_text(seconds: float) -> str:
    """An age, short: "42 s", "7 min", "3 h 12 min", "2 d 5 h"."""
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {(s % 3600) // 60} min"
    return f"{s // 86400} d {(s % 86400) // 3600} h"


def unread_text(age_s: float | None, unknown: bool) -> str:
    """The pipeline's oldest unread record: its age (the largest known), else "unknown" when a
    partition's record was not read in time, else "none" (nothing unread)."""
    if age_s is not None:
        return age_text(age_s)
    return "unknown" if unknown else "none"


def duration_text(seconds: float | None) -> str:
    """A batch's duration: "4.2 s", "42 s", "7 min 12 s", "1 h 3 min"; an em dash for none."""
    if seconds is None:
        return "\u2014"
    if 0 < seconds < 10:  # a tenth matters for a short batch; 0 is the axis' own "0 s"
        return f"{seconds:.1f} s"
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {(s % 3600) // 60} min"


# (id, title, the batch's key in status.batch_status, its formatter: the table's for that column)
BATCH_CHARTS: tuple[tuple[str, str, str, Callable[[Any], str]], ...] = (
    ("duration", "Duration, plan to commit", "duration_s", duration_text),
    ("written", "Records written", "records_written", count_text),
    ("quarantined", "Records quarantined", "records_quarantined", count_text),
)


def pipeline_charts(s: Mapping[str, Any]) -> list[markupsafe.Markup]:
    """The page's charts, in the order shown: lag, oldest unread, duration, written, quarantined."""
    trends = s.get("trends") or {}
    hours = float(trends.get("window_hours") or 24)
    samples: Sequence[Mapping[str, Any]] = trends.get("lag") or []
    batches: Sequence[Mapping[str, Any]] = trends.get("batches") or []
    return [
        _lag_chart(s, samples, hours),
        _age_chart(s, samples, hours),
        *(_batch_chart(batches, *spec) for spec in BATCH_CHARTS),
    ]


def _lag_chart(s: Mapping[str, Any], samples: Sequence[Mapping[str, Any]], hours: float) -> markupsafe.Markup:
    points = [
        TimePoint(p["ago_s"], p["lag_records"], f"{time_text(p['at'])}: {count_text(p['lag_records'])}")
        for p in samples
    ]
    latest = None
    if s.get("total_lag") is not None:  # the page read Kafka: its reading ends the line
        points.append(TimePoint(0.0, s["total_lag"], f"now: {count_text(s['total_lag'])}"))
        latest = Latest("now", count_text(s["total_lag"]))
    elif samples:
        latest = Latest(time_text(samples[-1]["at"]), count_text(samples[-1]["lag_records"]))
    return time_chart(
        "lag", f"Lag (offsets), last {hours:g} h", points, window_s=hours * 3600,
        window_label=f"{hours:g} h ago", fmt=count_text, latest=latest,
        note=None if samples else "Each plan and each lag check records the lag; none did in this window.",
    )  # fmt: skip


def _age_chart(s: Mapping[str, Any], samples: Sequence[Mapping[str, Any]], hours: float) -> markupsafe.Markup:
    aged = [p for p in samples if p["oldest_unread_age_s"] is not None]
    points = [
        TimePoint(
            p["ago_s"],
            p["oldest_unread_age_s"],
            f"{time_text(p['at'])}: {age_text(p['oldest_unread_age_s'])}",
        )
        for p in aged
    ]
    latest = None
    if s.get("total_lag") is not None:  # the page read Kafka: its reading ends the line
        age, unknown = s.get("oldest_unread_age_s"), s.get("oldest_unread_error") is not None
        latest = Latest("now", unread_text(age, unknown))
        if age is not None or not unknown:  # nothing unread is an age of 0
            points.append(TimePoint(0.0, age or 0.0, f"now: {latest.text}"))
    elif aged:
        latest = Latest(time_text(aged[-1]["at"]), age_text(aged[-1]["oldest_unread_age_s"]))
    note = None
    if not aged:  # only lag checks read records: say where the history comes from
        note = "Lag checks (eos-ingest check-lag, the alerts DAG) record the age; a plan reads no record."
    return time_chart(
        "oldest-unread", f"Oldest unread record, last {hours:g} h", points, window_s=hours * 3600,
        window_label=f"{hours:g} h ago", fmt=age_text, latest=latest, note=note,
    )  # fmt: skip


def _batch_chart(
    batches: Sequence[Mapping[str, Any]], chart_id: str, title: str, key: str, fmt: Callable[[Any], str]
) -> markupsafe.Markup:
    bars = [
        Bar(
            f"#{b['batch_id']}", b[key],
            f"batch {b['batch_id']} ({b['kind']}, {b['status']}): {fmt(b[key]) if b[key] is not None else 'none yet'}",
            b["status"] if b["status"] in STATUSES else "",
        )
        for b in batches
    ]  # fmt: skip
    newest = next((b for b in reversed(batches) if b[key] is not None), None)
    latest = None if newest is None else Latest(f"batch {newest['batch_id']}", fmt(newest[key]))
    shown = f"last {len(batches)} batch{'' if len(batches) == 1 else 'es'}" if batches else "last batches"
    return bar_chart(chart_id, f"{title}, {shown}", bars, fmt=fmt, latest=latest)

"""The page's charts as SVG drawn on the server (airflow/svg_charts.py) and the pipeline page's
five charts from a status (airflow/page_charts.py): well-formed, labelled, scaled, empty, escaped.

Parsed with xml.etree, as any XML reader would: a chart that is not well-formed fails here before a
browser would draw it wrong."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from eos_ingest.airflow import page_charts
from eos_ingest.airflow.svg_charts import (
    BOTTOM,
    LEFT,
    RIGHT,
    TOP,
    Bar,
    Latest,
    TimePoint,
    bar_chart,
    time_chart,
)

DAY = 86400.0
XSS = "\"'><script>alert(1)</script>"


def parse(markup: Any) -> ET.Element:
    figure = ET.fromstring(str(markup))
    assert figure.tag == "figure" and figure.get("class") == "chart"
    return figure


def svg_of(figure: ET.Element) -> ET.Element:
    (svg,) = figure.findall("svg")
    return svg


def caption(figure: ET.Element) -> dict[str, str]:
    """The caption's title, and the latest value's time and text."""
    found = {"title": figure.findtext("figcaption/span[@class='chart-title']")}
    found["when"] = figure.findtext("figcaption/span[@class='chart-latest']/span[@class='chart-when']")
    found["value"] = figure.findtext("figcaption/span[@class='chart-latest']/span[@class='chart-value']")
    return found


def texts(svg: ET.Element, css: str = "axis") -> list[str]:
    return [t.text or "" for t in svg.iter("text") if t.get("class") == css]


def polyline(svg: ET.Element) -> list[tuple[float, float]]:
    (line,) = [e for e in svg.iter("polyline") if e.get("class") == "line"]
    return [tuple(map(float, xy.split(","))) for xy in line.get("points", "").split()]  # type: ignore[misc]


def bars(svg: ET.Element) -> list[ET.Element]:
    return [r for r in svg.iter("rect") if (r.get("class") or "").startswith("bar")]


def records(value: float) -> str:
    return f"{value:,.0f}"


NOW_20 = Latest("now", "20")


def lag_chart(points: list[TimePoint], latest: Latest | None = NOW_20) -> ET.Element:
    return parse(
        time_chart(
            "lag", "Lag, last 24 h", points, window_s=DAY, window_label="24 h ago", fmt=records, latest=latest
        )
    )


def test_a_time_chart_is_named_for_people_and_for_screen_readers() -> None:
    figure = lag_chart([TimePoint(DAY, 1500, "a day ago: 1,500"), TimePoint(0, 20, "now: 20")])
    svg = svg_of(figure)

    assert figure.get("data-chart") == "lag" and figure.get("id") == "chart-lag"
    assert caption(figure) == {"title": "Lag, last 24 h", "when": "now", "value": "20"}
    assert svg.get("role") == "img"
    labelled = svg.get("aria-labelledby", "").split()
    by_id = {e.get("id"): e for e in svg.iter() if e.get("id")}
    assert [by_id[i].tag for i in labelled] == ["title", "desc"]  # both exist, in the SVG
    assert by_id[labelled[0]].text == "Lag, last 24 h: now 20"
    assert by_id[labelled[1]].text == "2 points, 24 h ago to now; the axis from 0 to 1,500"
    assert texts(svg) == ["1,500", "0", "24 h ago", "now"]  # the axis' max and min, the window's ends
    assert svg.get("viewBox") == "0 0 320 112"


def test_points_are_placed_by_their_age_in_the_window_and_their_share_of_the_largest_value() -> None:
    svg = svg_of(
        lag_chart([TimePoint(0, 0, "now"), TimePoint(DAY / 2, 50, "noon"), TimePoint(DAY, 100, "then")])
    )

    # Oldest first, left to right; the largest at the top, 0 at the bottom.
    assert polyline(svg) == [
        (LEFT, TOP), ((LEFT + RIGHT) / 2, (TOP + BOTTOM) / 2), (RIGHT, BOTTOM),
    ]  # fmt: skip
    (dot,) = svg.iter("circle")  # the newest point, marked, with its tooltip
    assert (float(dot.get("cx", "")), float(dot.get("cy", ""))) == (RIGHT, BOTTOM)
    assert dot.findtext("title") == "now"


def test_points_outside_the_window_are_held_at_its_edges_and_all_zeros_lie_on_the_bottom_line() -> None:
    svg = svg_of(lag_chart([TimePoint(2 * DAY, 0, "older"), TimePoint(-60, 0, "a clock ahead")]))
    assert polyline(svg) == [(LEFT, BOTTOM), (RIGHT, BOTTOM)]
    assert texts(svg)[:2] == ["0", "0"]


def test_of_points_read_at_one_instant_the_last_given_is_the_newest() -> None:
    svg = svg_of(
        lag_chart([TimePoint(60, 3, "a sample"), TimePoint(0, 5, "a sample now"), TimePoint(0, 9, "now: 9")])
    )
    (dot,) = svg.iter("circle")
    assert dot.findtext("title") == "now: 9" and float(dot.get("cy", "")) == TOP  # 9 is the largest


def test_one_point_is_a_dot_without_a_line() -> None:
    svg = svg_of(lag_chart([TimePoint(0, 7, "now: 7")]))
    assert not list(svg.iter("polyline"))
    assert [(c.get("cx"), c.get("cy")) for c in svg.iter("circle")] == [(f"{RIGHT:.1f}", f"{TOP:.1f}")]


def test_an_empty_chart_says_so_and_draws_nothing() -> None:
    figure = lag_chart([], latest=None)
    svg = svg_of(figure)
    assert texts(svg, "empty") == ["no samples yet"]
    assert not list(svg.iter("polyline")) and not list(svg.iter("circle")) and texts(svg) == []
    assert figure.find("figcaption/span[@class='chart-latest']") is None
    assert svg.findtext("desc") == "no samples yet" and svg.findtext("title") == "Lag, last 24 h"
    empty_bars = parse(bar_chart("written", "Records written", [], fmt=records, latest=None))
    assert texts(svg_of(empty_bars), "empty") == ["no batches yet"] and not bars(svg_of(empty_bars))


def test_bars_are_scaled_to_the_largest_and_an_item_without_a_value_has_none() -> None:
    figure = parse(
        bar_chart(
            "written", "Records written", [
                Bar("#1", 100, "batch 1: 100", "committed"), Bar("#2", None, "batch 2: none yet", "planned"),
                Bar("#3", 50, "batch 3: 50", "failed"), Bar("#4", 0, "batch 4: 0", "committed"),
            ],
            fmt=records, latest=Latest("batch 4", "0"),
        )
    )  # fmt: skip
    svg = svg_of(figure)
    drawn = bars(svg)
    assert [b.findtext("title") for b in drawn] == ["batch 1: 100", "batch 3: 50", "batch 4: 0"]
    assert [b.get("class") for b in drawn] == ["bar committed", "bar failed", "bar committed"]
    heights = [float(b.get("height", "")) for b in drawn]
    assert heights == [BOTTOM - TOP, (BOTTOM - TOP) / 2, 0.0]
    assert all(float(b.get("y", "")) + h == BOTTOM for b, h in zip(drawn, heights, strict=True))
    slot = (RIGHT - LEFT) / 4  # four slots: the one without a value stays empty
    assert [round((float(b.get("x", "")) - LEFT) // slot) for b in drawn] == [0, 2, 3]
    assert texts(svg) == ["100", "0", "#1", "#4"]
    assert svg.findtext("desc") == "3 bars, #1 to #4; the axis from 0 to 100"


def test_every_text_and_attribute_value_is_escaped() -> None:
    figure = parse(
        time_chart(
            XSS, XSS, [TimePoint(0, 1, XSS), TimePoint(10, 2, XSS)], window_s=DAY, window_label=XSS,
            fmt=lambda v: XSS, latest=Latest(XSS, XSS), empty=XSS, note=XSS,
        )
    )  # fmt: skip
    assert not list(figure.iter("script"))  # parsed as text, not as an element
    assert caption(figure) == {"title": XSS, "when": XSS, "value": XSS}
    assert figure.get("data-chart") == XSS and figure.findtext("p") == XSS
    markup = str(bar_chart("b", XSS, [Bar(XSS, 1, XSS, XSS)], fmt=lambda v: XSS, latest=None))
    assert "<script" not in markup and "&lt;script&gt;" in markup
    assert not list(parse(markup).iter("script"))


def test_an_element_without_text_is_closed_as_html_reads_it() -> None:
    """HTML ignores the slash of `<span/>` and leaves the span open over the rest of the page."""
    markup = str(time_chart("c", "", [], window_s=DAY, window_label="", fmt=records, latest=Latest("", "")))
    assert "/>" not in markup
    assert '<span class="chart-title"></span>' in markup and '<span class="chart-value"></span>' in markup


# -- the pipeline page's charts -----------------------------------------------------------------------


def test_the_formatters_read_as_the_tables_do() -> None:
    ages = [page_charts.age_text(s) for s in (0, 42.9, 420, 3 * 3600 + 12 * 60 + 5, 2 * 86400 + 5 * 3600)]
    assert ages == ["0 s", "42 s", "7 min", "3 h 12 min", "2 d 5 h"]
    durations = [page_charts.duration_text(s) for s in (None, 0, 4.25, 42.7, 432, 3780)]
    assert durations == ["\u2014", "0 s", "4.2 s", "42 s", "7 min 12 s", "1 h 3 min"]
    assert [page_charts.count_text(v) for v in (None, 1234567, 2.0)] == ["\u2014", "1,234,567", "2"]
    unread = [page_charts.unread_text(a, u) for a, u in ((95.0, True), (None, True), (None, False))]
    assert unread == ["1 min", "unknown", "none"]  # a known age first, even if another is unknown
    assert page_charts.time_text("2026-11-25T11:58:30.123+00:00") == "2026-11-25 11:58:30 UTC"


def status(**overrides: Any) -> dict[str, Any]:
    """A pipeline_status with trends: two lag samples (the first without an age: a plan's) and
    three batches (the newest still planned)."""
    shown: dict[str, Any] = {
        "total_lag": 25, "oldest_unread_age_s": 130.0, "oldest_unread_error": None,
        "trends": {
            "window_hours": 24,
            "lag": [
                {"at": "2026-11-25T02:00:00+00:00", "ago_s": 36000.0, "samples": 1, "lag_records": 400, "oldest_unread_age_s": None},
                {"at": "2026-11-25T11:00:00+00:00", "ago_s": 3600.0, "samples": 2, "lag_records": 100, "oldest_unread_age_s": 600.0},
            ],
            "batches": [
                {"batch_id": 7, "kind": "scheduled", "status": "committed", "created_at": "x", "duration_s": 61.5, "records_written": 90, "records_quarantined": 3},
                {"batch_id": 8, "kind": "backfill", "status": "failed", "created_at": "x", "duration_s": 5.0, "records_written": None, "records_quarantined": None},
                {"batch_id": 9, "kind": "scheduled", "status": "planned", "created_at": "x", "duration_s": None, "records_written": None, "records_quarantined": None},
            ],
        },
    }  # fmt: skip
    shown.update(overrides)
    return shown


def page(shown: dict[str, Any]) -> dict[str, ET.Element]:
    figures = [parse(chart) for chart in page_charts.pipeline_charts(shown)]
    return {f.get("data-chart", ""): f for f in figures}


def test_the_page_has_five_charts_each_titled() -> None:
    charts = page(status())
    assert {name: caption(f)["title"] for name, f in charts.items()} == {
        "lag": "Lag (offsets), last 24 h",
        "oldest-unread": "Oldest unread record, last 24 h",
        "duration": "Duration, plan to commit, last 3 batches",
        "written": "Records written, last 3 batches",
        "quarantined": "Records quarantined, last 3 batches",
    }


def test_the_lag_charts_end_at_the_pages_own_reading() -> None:
    charts = page(status())
    lag, age = svg_of(charts["lag"]), svg_of(charts["oldest-unread"])
    assert caption(charts["lag"])["value"] == "25" and caption(charts["lag"])["when"] == "now"
    assert polyline(lag)[-1][0] == RIGHT and [c.findtext("title") for c in lag.iter("circle")] == ["now: 25"]
    assert len(polyline(lag)) == 3  # two samples and now
    # The plan's sample has no age: the age's line is the check's sample and now.
    assert (caption(charts["oldest-unread"])["when"], caption(charts["oldest-unread"])["value"]) == (
        "now",
        "2 min",
    )
    assert len(polyline(age)) == 2 and charts["oldest-unread"].find("p") is None


def test_with_kafka_down_the_lag_charts_end_at_their_last_sample_and_say_when() -> None:
    charts = page(
        status(total_lag=None, oldest_unread_age_s=None, oldest_unread_error="no Kafka offsets: down")
    )
    assert caption(charts["lag"]) | {"title": ""} == {
        "title": "",
        "when": "2026-11-25 11:00:00 UTC",
        "value": "100",
    }
    assert caption(charts["oldest-unread"])["value"] == "10 min"
    assert len(polyline(svg_of(charts["lag"]))) == 2


@pytest.mark.parametrize(
    ("age", "error", "value", "dot"),
    [(None, None, "none", "now: none"), (None, "not read in time", "unknown", None), (5.0, "one unknown", "5 s", "now: 5 s")],
)  # fmt: skip
def test_the_age_now_is_none_when_nothing_is_unread_and_undrawn_when_unknown(age, error, value, dot) -> None:
    shown = status(oldest_unread_age_s=age, oldest_unread_error=error)
    chart = page(shown)["oldest-unread"]
    assert caption(chart)["value"] == value == page_charts.unread_text(age, error is not None)  # the table's
    assert [c.findtext("title") for c in svg_of(chart).iter("circle")] == (
        [dot] if dot else ["2026-11-25 11:00:00 UTC: 10 min"]
    )


def test_without_lag_samples_the_charts_say_where_their_history_comes_from() -> None:
    charts = page(status(trends={"window_hours": 24, "lag": [], "batches": []}))
    assert "lag check" in (charts["lag"].findtext("p") or "")
    assert "check-lag" in (charts["oldest-unread"].findtext("p") or "")
    empty = page(status(total_lag=None, oldest_unread_age_s=None, oldest_unread_error="down", trends={}))
    for name in ("lag", "oldest-unread"):
        assert texts(svg_of(empty[name]), "empty") == ["no samples yet"]
    for name in ("duration", "written", "quarantined"):
        assert texts(svg_of(empty[name]), "empty") == ["no batches yet"]
        assert caption(empty[name])["title"].endswith(", last batches")


def test_a_batch_chart_ends_at_the_newest_batch_that_has_its_figure() -> None:
    charts = page(status())
    assert (caption(charts["duration"])["when"], caption(charts["duration"])["value"]) == ("batch 8", "5.0 s")
    assert (caption(charts["written"])["when"], caption(charts["written"])["value"]) == ("batch 7", "90")
    assert [b.get("class") for b in bars(svg_of(charts["duration"]))] == ["bar committed", "bar failed"]
    assert [b.findtext("title") for b in bars(svg_of(charts["quarantined"]))] == [
        "batch 7 (scheduled, committed): 3"
    ]
    assert texts(svg_of(charts["written"]))[-2:] == ["#7", "#9"]

"""Small charts drawn on the server as inline SVG: no script, no JavaScript library, no request.

Two kinds: a line over a time window (time_chart) and one bar per item (bar_chart). Each is a
``<figure>``: a caption with the chart's title and its latest value as text, then the SVG with a
``<title>`` and a ``<desc>`` (what a screen reader says), the axis' maximum and its ends as text.
With nothing to draw the SVG says so ("no samples yet", or the caller's words) instead of an
empty frame. The colours are CSS classes that base.html maps to Airflow's theme variables, so the
charts follow its light and dark looks.

Built with xml.etree: every text and attribute value is escaped by the serializer, and the markup
is well-formed XML (every element closed, which HTML also reads right for SVG and for the figure).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import markupsafe

__all__ = ["Bar", "Latest", "TimePoint", "bar_chart", "time_chart"]

# The drawing's own units (viewBox); CSS scales the SVG to its column's width.
WIDTH, HEIGHT = 320, 112
# The plot area: the axis' values left of it, its ends under it.
LEFT, RIGHT, TOP, BOTTOM = 62.0, 314.0, 8.0, 90.0
LABELS_Y = 106.0


@dataclass(frozen=True)
class Latest:
    """The value the caption shows: `text` as the page's table shows it, `when` it was read."""

    when: str
    text: str


@dataclass(frozen=True)
class TimePoint:
    """A value `ago_s` seconds before the window's end; `label` is its tooltip."""

    ago_s: float
    value: float
    label: str


@dataclass(frozen=True)
class Bar:
    """One item, e.g. a batch: `name` under the axis, no bar when `value` is None; `css` a class
    of its bar (a batch's status); `label` its tooltip."""

    name: str
    value: float | None
    label: str
    css: str = ""


def time_chart(
    chart_id: str,
    title: str,
    points: Sequence[TimePoint],
    *,
    window_s: float,
    window_label: str,
    fmt: Callable[[float], str],
    latest: Latest | None,
    empty: str = "no samples yet",
    note: str | None = None,
) -> markupsafe.Markup:
    """A line through `points` over the last `window_s` seconds (left: `window_label`, right: now),
    from 0 to the largest value; the newest point is marked."""
    figure, svg = _figure(chart_id, title, latest, note)
    top = max((p.value for p in points), default=0.0)
    span = f"{window_label} to now"
    _describe(
        svg, chart_id, title, latest, _summary(len(points), "point", top, fmt, span) if points else empty
    )
    _frame(svg)
    if not points:
        _empty(svg, empty)
        return _markup(figure)
    _value_axis(svg, top, fmt)
    # Oldest first; of points read at one instant the one given last is the newest (the page's own).
    ordered = sorted(points, key=lambda p: -p.ago_s)
    xy = [(_time_x(p.ago_s, window_s), _value_y(p.value, top)) for p in ordered]
    if len(xy) > 1:
        ET.SubElement(
            svg, "polyline", {"class": "line", "points": " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)}
        )
    newest = ordered[-1]
    x, y = xy[-1]
    dot = ET.SubElement(svg, "circle", {"class": "dot", "cx": f"{x:.1f}", "cy": f"{y:.1f}", "r": "2.5"})
    ET.SubElement(dot, "title").text = newest.label
    _ends(svg, window_label, "now")
    return _markup(figure)


def bar_chart(
    chart_id: str,
    title: str,
    bars: Sequence[Bar],
    *,
    fmt: Callable[[float], str],
    latest: Latest | None,
    empty: str = "no batches yet",
) -> markupsafe.Markup:
    """One bar per item, left to right, from 0 to the largest value."""
    figure, svg = _figure(chart_id, title, latest, None)
    top = max((b.value for b in bars if b.value is not None), default=0.0)
    shown = len([b for b in bars if b.value is not None])
    span = f"{bars[0].name} to {bars[-1].name}" if bars else ""
    _describe(svg, chart_id, title, latest, _summary(shown, "bar", top, fmt, span) if bars else empty)
    _frame(svg)
    if not bars:
        _empty(svg, empty)
        return _markup(figure)
    _value_axis(svg, top, fmt)
    slot = (RIGHT - LEFT) / len(bars)
    width = max(slot * 0.7, 1.0)
    for i, bar in enumerate(bars):
        if bar.value is None:
            continue
        y = _value_y(bar.value, top)
        attrs = {"class": f"bar {bar.css}".strip(), "x": f"{LEFT + i * slot + (slot - width) / 2:.1f}"}
        attrs.update(y=f"{y:.1f}", width=f"{width:.1f}", height=f"{BOTTOM - y:.1f}")
        ET.SubElement(ET.SubElement(svg, "rect", attrs), "title").text = bar.label
    _ends(svg, bars[0].name, bars[-1].name)
    return _markup(figure)


def _figure(
    chart_id: str, title: str, latest: Latest | None, note: str | None
) -> tuple[ET.Element, ET.Element]:
    figure = ET.Element("figure", {"class": "chart", "id": f"chart-{chart_id}", "data-chart": chart_id})
    caption = ET.SubElement(figure, "figcaption")
    ET.SubElement(caption, "span", {"class": "chart-title"}).text = title
    if latest is not None:
        shown = ET.SubElement(caption, "span", {"class": "chart-latest"})
        when = ET.SubElement(shown, "span", {"class": "chart-when"})
        when.text, when.tail = latest.when, " "
        ET.SubElement(shown, "span", {"class": "chart-value"}).text = latest.text
    labelled = f"chart-{chart_id}-title chart-{chart_id}-desc"
    svg = ET.SubElement(
        figure,
        "svg",
        {"viewBox": f"0 0 {WIDTH} {HEIGHT}", "width": str(WIDTH), "height": str(HEIGHT), "role": "img",
         "aria-labelledby": labelled},
    )  # fmt: skip
    if note:
        ET.SubElement(figure, "p", {"class": "chart-note muted small"}).text = note
    return figure, svg


def _describe(svg: ET.Element, chart_id: str, title: str, latest: Latest | None, summary: str) -> None:
    """<title> (the name and the latest value) and <desc> (the range), read by screen readers."""
    name = title if latest is None else f"{title}: {latest.when} {latest.text}"
    ET.SubElement(svg, "title", {"id": f"chart-{chart_id}-title"}).text = name
    ET.SubElement(svg, "desc", {"id": f"chart-{chart_id}-desc"}).text = summary


def _summary(count: int, what: str, top: float, fmt: Callable[[float], str], span: str) -> str:
    """E.g. "12 points, 24 h ago to now; the axis from 0 to 1,234"."""
    return f"{count} {what}{'' if count == 1 else 's'}, {span}; the axis from 0 to {fmt(top)}"


def _frame(svg: ET.Element) -> None:
    box = {
        "x": f"{LEFT:.1f}",
        "y": f"{TOP:.1f}",
        "width": f"{RIGHT - LEFT:.1f}",
        "height": f"{BOTTOM - TOP:.1f}",
    }
    ET.SubElement(svg, "rect", {"class": "frame", **box})


def _empty(svg: ET.Element, text: str) -> None:
    at = {"x": f"{(LEFT + RIGHT) / 2:.1f}", "y": f"{(TOP + BOTTOM) / 2 + 4:.1f}", "text-anchor": "middle"}
    ET.SubElement(svg, "text", {"class": "empty", **at}).text = text


def _value_axis(svg: ET.Element, top: float, fmt: Callable[[float], str]) -> None:
    """The axis' maximum at the top and 0 at the bottom, left of the plot."""
    for value, y in ((top, TOP + 8), (0.0, BOTTOM)):
        at = {"x": f"{LEFT - 4:.1f}", "y": f"{y:.1f}", "text-anchor": "end"}
        ET.SubElement(svg, "text", {"class": "axis", **at}).text = fmt(value)


def _ends(svg: ET.Element, first: str, last: str) -> None:
    """The x axis' two ends, under the plot."""
    for text, x, anchor in ((first, LEFT, "start"), (last, RIGHT, "end")):
        at = {"x": f"{x:.1f}", "y": f"{LABELS_Y:.1f}", "text-anchor": anchor}
        ET.SubElement(svg, "text", {"class": "axis", **at}).text = text


def _time_x(ago_s: float, window_s: float) -> float:
    """Now is the right edge, `window_s` ago the left; outside the window is held at its edge."""
    share = min(max(ago_s / window_s, 0.0), 1.0) if window_s > 0 else 0.0
    return RIGHT - share * (RIGHT - LEFT)


def _value_y(value: float, top: float) -> float:
    """0 at the bottom, `top` at the top; all zeros lie on the bottom line."""
    share = min(max(value / top, 0.0), 1.0) if top > 0 else 0.0
    return BOTTOM - share * (BOTTOM - TOP)


def _markup(figure: ET.Element) -> markupsafe.Markup:
    # Explicit end tags: `<span/>` would open an element in HTML; `<rect></rect>` is right in both.
    return markupsafe.Markup(ET.tostring(figure, encoding="unicode", short_empty_elements=False))

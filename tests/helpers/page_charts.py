"""The Ingestion page's charts as a reader of its HTML finds them, each parsed as XML."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET


def figures(page: str) -> dict[str, ET.Element]:
    """The page's charts by name, each parsed as XML (so each is well-formed on its own)."""
    found = [ET.fromstring(f) for f in re.findall(r'<figure class="chart".*?</figure>', page, re.S)]
    return {f.get("data-chart", ""): f for f in found}


def latest(figure: ET.Element) -> tuple[str | None, str | None]:
    """(when, value) of the latest point the chart's caption shows."""
    shown = figure.find("figcaption/span[@class='chart-latest']")
    assert shown is not None, ET.tostring(figure)
    return shown.findtext("span[@class='chart-when']"), shown.findtext("span[@class='chart-value']")

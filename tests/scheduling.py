"""How `make test` spreads the suite over its xdist workers: a test file at a time, longest first.

A file is one unit of work (as with xdist's --dist loadfile), so a module's fixtures are built
once, except the e2e files that share one `airflow standalone` (tests/e2e/conftest.py): they are
one unit, so one worker starts that stack instead of each worker its own (a start and stop cost
about a minute and a half of both cores, and a running stack's scheduler takes CPU all along).

Units go out longest first, by the seconds each took in a run of the whole suite, kept in
tests/durations.json: a long file handed out last would leave the other worker idle at the end.
A file not listed there goes first (its length is unknown; a short one costs little there).
After a change of the suite's shape, refresh the file from a run's JUnit XML:
`python -m tests.scheduling .state/test-times.xml`.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

DURATIONS = Path(__file__).with_name("durations.json")
# The e2e files served by the shared Airflow stack (all but the docker compose one).
SHARED_STACK_FILES = frozenset(
    f"tests/e2e/{name}.py"
    for name in (
        "test_spark_cluster",
        "test_airflow_e2e",
        "test_airflow_ui_browser",
        "test_sasl_ssl_e2e",
        "test_no_secret_leaks_e2e",
    )
)
SHARED_STACK_SCOPE = "tests/e2e (shared airflow standalone)"


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or the shared Airflow stack's unit."""
    path = nodeid.split("::", 1)[0]
    return SHARED_STACK_SCOPE if path in SHARED_STACK_FILES else path


def longest_first(items: list[pytest.Item], durations: dict[str, float] | None = None) -> None:
    """Sort `items` in place by their unit's recorded seconds, longest first (unlisted units first);
    a unit's tests stay together and in their order."""
    seconds = load_durations() if durations is None else durations
    first_seen = {scope_of(item.nodeid): i for i, item in reversed(list(enumerate(items)))}

    def key(item: pytest.Item) -> tuple[float, int]:
        scope = scope_of(item.nodeid)
        return (-seconds.get(scope, float("inf")), first_seen[scope])

    items.sort(key=key)


class FileScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with scope_of's units; run with --no-loadscope-reorder so the
    units go out in the collected order (longest_first's)."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)


def load_durations(path: Path = DURATIONS) -> dict[str, float]:
    return json.loads(path.read_text()) if path.is_file() else {}


def durations_from_junit(xml: Path) -> dict[str, float]:
    """Seconds per unit of work from a JUnit XML report (pytest --junitxml)."""
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(xml).iter("testcase"):
        parts = case.get("classname", "").split(".")
        if parts and parts[-1][:1].isupper():  # a test class: the module is the part before it
            parts = parts[:-1]
        seconds[scope_of("/".join(parts) + ".py")] += float(case.get("time", 0))
    return {scope: round(s, 1) for scope, s in sorted(seconds.items())}


def main(argv: Sequence[str] = sys.argv[1:]) -> None:
    durations = durations_from_junit(Path(argv[0]))
    DURATIONS.write_text(json.dumps(durations, indent=1) + "\n")
    print(f"{DURATIONS}: {len(durations)} units, {sum(durations.values()):.0f} s in all")


if __name__ == "__main__":
    main()

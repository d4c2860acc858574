"""eos_ingest/jvm.py is the package's one door to Py4J: no other module touches pyspark's private
attributes, and its gate is the pyspark series pyproject allows. No Spark: the source and the
installed versions only."""

from __future__ import annotations

import ast
import logging
import re
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from eos_ingest import jvm
from eos_ingest.versions import release

PACKAGE = Path(jvm.__file__).parent
# pyspark's private attributes that lead to the JVM or wrap its objects.
PRIVATE = frozenset({"_jvm", "_jsparkSession", "_jsc", "_jdf", "_jcol", "_jconf", "_gateway", "_sc"})


def private_uses(source: str) -> list[str]:
    """`obj.<attr>` and getattr(obj, "<attr>") of PRIVATE in `source`, as "line: attr"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE:
            found.append(f"{node.lineno}: {node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in PRIVATE
        ):
            found.append(f"{node.lineno}: {node.args[1].value}")
    return found


def test_the_checker_finds_both_spellings() -> None:
    assert private_uses("a = s._jvm\nb = getattr(f, '_jdf')\nc = s.jvm\n") == ["1: _jvm", "2: _jdf"]


def test_no_module_but_the_door_touches_pysparks_private_attributes() -> None:
    uses = {
        str(path.relative_to(PACKAGE.parent)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != Path(jvm.__file__) and (found := private_uses(path.read_text()))
    }
    assert uses == {}, "reach the JVM through eos_ingest.jvm"


def test_the_gate_is_the_pyspark_series_pyproject_allows() -> None:
    """When the pin moves, the door is read and tested again on the new series: then move
    KNOWN_SERIES with it."""
    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
    pin = next(d for d in pyproject["project"]["dependencies"] if re.match(r"pyspark\b(?!-)", d))
    bounds = re.fullmatch(r"pyspark>=([\d.]+),<([\d.]+)", pin.replace(" ", ""))
    assert bounds, pin
    low, high = bounds.groups()
    assert release(low)[:2] == jvm.KNOWN_SERIES
    assert release(high)[:2] == (jvm.KNOWN_SERIES[0], jvm.KNOWN_SERIES[1] + 1)
    assert jvm.is_known(jvm.pyspark_version()), "the installed pyspark (the lock's) is the tested one"


def test_outside_the_tested_series_the_door_opens_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    jvm._checked.cache_clear()
    monkeypatch.setattr(jvm, "pyspark_version", lambda: (4, 2, 0))
    session = SimpleNamespace(_jvm="the gateway's view", _jsparkSession="the Java session")
    with caplog.at_level(logging.WARNING, logger=jvm.__name__):
        assert jvm.jvm_of(session) == "the gateway's view"
        assert jvm.java_session(session) == "the Java session"
    jvm._checked.cache_clear()
    assert [r.getMessage() for r in caplog.records] == [
        "pyspark 4.2.0: eos_ingest.jvm reaches the JVM through pyspark's private attributes, "
        "tested on pyspark 4.1.x only"
    ]


def test_a_session_without_a_jvm_here_is_named_not_an_attribute_error() -> None:
    connect_like = SimpleNamespace(_jvm=None)
    with pytest.raises(RuntimeError, match="not a Spark Connect one"):
        jvm.jvm_of(connect_like)

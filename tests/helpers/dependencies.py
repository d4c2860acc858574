"""The distributions pyproject.toml declares, by their normalized names (PEP 503)."""

from __future__ import annotations

import re
import tomllib

from eos_ingest import paths


def distribution_name(requirement: str) -> str:
    """A requirement's distribution name, normalized: `Foo_Bar[x]>=1` -> `foo-bar`."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0]).lower()


def declared() -> tuple[set[str], dict[str, set[str]]]:
    """(the dependencies, each extra's) of pyproject.toml's [project]."""
    project = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())["project"]
    extras = {
        extra: {distribution_name(r) for r in requirements}
        for extra, requirements in project.get("optional-dependencies", {}).items()
    }
    return {distribution_name(r) for r in project["dependencies"]}, extras


def pyproject_series(name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The (major, minor) bounds of pyproject's `name>=A.B,<C.D` dependency."""
    dependencies = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(d.replace(" ", "") for d in dependencies if re.match(rf"{re.escape(name)}[<>=]", d))
    bounds = re.fullmatch(rf"{re.escape(name)}>=(\d+)\.(\d+),<(\d+)\.(\d+)", spec)
    assert bounds, spec
    low_major, low_minor, high_major, high_minor = map(int, bounds.groups())
    return (low_major, low_minor), (high_major, high_minor)

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

"""MkDocs hook: the repository's README.md becomes the site's home page, and bench/README.md (with
its charts) and bench/HISTORY.md its benchmark pages, so that their links are checked with the rest (--strict).

They stay where a GitHub reader looks for them; their links are written for that place
(`docs/install.md`, `bench/README.md`), so they are rewritten here to the site's layout.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parent.parent
# (site page, source file, how its links change)
PAGES = [
    ("index.md", REPO / "README.md", [(r"\]\(docs/", "]("), (r"\]\(bench/", "](bench/")]),
    ("bench/README.md", REPO / "bench" / "README.md", [(r"\]\(HISTORY\.md", "](HISTORY.md")]),
    ("bench/HISTORY.md", REPO / "bench" / "HISTORY.md", [(r"\]\(README\.md", "](README.md")]),
]


def on_files(files: Files, config: dict) -> Files:
    for page, source, rewrites in PAGES:
        text = source.read_text(encoding="utf-8")
        for pattern, replacement in rewrites:
            text = re.sub(pattern, replacement, text)
        files.append(File.generated(config, page, content=text))
    for chart in sorted((REPO / "bench" / "charts").glob("*.png")):  # bench/README.md's charts
        files.append(File.generated(config, f"bench/charts/{chart.name}", abs_src_path=str(chart)))
    return files

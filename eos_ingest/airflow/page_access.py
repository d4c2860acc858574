"""Who may see what on the Ingestion page: Airflow's auth manager, asked about a pipeline's DAGs.

A pipeline's status, batch errors and Data Docs are as sensitive as its DAGs' runs and logs, so
the page shows a pipeline to a user only when Airflow's configured auth manager lets that user
read (GET) both of its DAGs (eos_ingest.airflow.dag_ids). The auth manager decides, whichever it is:
SimpleAuthManager lets every role read every DAG; the FAB auth manager grants a role read on all
DAGs or on `DAG:<dag id>` resources (docs/ui.md, "Permissions").

The Data Docs site is one folder for every pipeline (eos_ingest.quality.data_docs.data_docs_root); a file
belongs to the pipeline whose suite it shows: `expectations/<name>.html` and
`validations/<name>/...`. Its shared assets (`static/`) are for any logged-in user; every other
file (the site's home page lists every suite and run) needs every pipeline that the site shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from eos_ingest.airflow.dag_ids import pipeline_dag_ids

# Data Docs folders whose first part is the pipeline (the GX suite is named after it).
PIPELINE_FOLDERS = ("expectations", "validations")
SHARED_FOLDER = "static"  # CSS, fonts, images of the GX site: nothing about a pipeline


def forbidden_reason(name: str) -> str:
    """The one line a refused request answers with: it names the DAGs to get read access to, of
    the pipeline asked for only (never another pipeline's name, nor whether this one exists)."""
    ingest, backfill = pipeline_dag_ids(name)
    return f"you may not read pipeline {name!r}: ask for read access to the DAGs {ingest} and {backfill}"


@dataclass(frozen=True)
class PipelineAccess:
    """One user's read access, decided by `auth_manager` (Airflow's BaseAuthManager API)."""

    auth_manager: Any
    user: Any

    def readable(self, names: Iterable[str]) -> set[str]:
        """The pipelines of `names` whose DAGs the user may all read. One call for every DAG:
        an auth manager may answer a set in one query (BaseAuthManager.filter_authorized_dag_ids)."""
        wanted = {name: set(pipeline_dag_ids(name)) for name in set(names)}
        dag_ids = set().union(*wanted.values())
        allowed = self.auth_manager.filter_authorized_dag_ids(dag_ids=dag_ids, user=self.user, method="GET")
        return {name for name, ids in wanted.items() if ids <= allowed}

    def may_read(self, name: str) -> bool:
        return name in self.readable([name])

    def may_read_data_docs(self, relpath: str, site_root: Path) -> bool:
        """Whether the user may open the Data Docs file `relpath` (relative to `site_root`)."""
        parts = PurePosixPath(relpath).parts
        if parts and parts[0] == SHARED_FOLDER:
            return True
        if len(parts) >= 2 and parts[0] in PIPELINE_FOLDERS:
            name = parts[1].removesuffix(".html") if parts[0] == "expectations" else parts[1]
            return self.may_read(name)
        shown = pipelines_in_site(site_root)
        return self.readable(shown) == shown

    def may_read_whole_site(self, site_root: Path) -> bool:
        """Whether the site's home page (which lists every suite and run) is for this user."""
        return self.may_read_data_docs("index.html", site_root)


def pipelines_in_site(site_root: Path) -> set[str]:
    """Every pipeline that the Data Docs site has a page of: its suites and its validation runs."""
    expectations, validations = (site_root / folder for folder in PIPELINE_FOLDERS)
    names = {p.stem for p in expectations.glob("*.html")} if expectations.is_dir() else set()
    if validations.is_dir():
        names |= {p.name for p in validations.iterdir() if p.is_dir()}
    return names


def request_access(user: Any) -> PipelineAccess:
    """The access of the request's user, asked of the API server's auth manager (the one
    `[core] auth_manager` configures; the plugin runs inside the API server)."""
    from airflow.api_fastapi.app import get_auth_manager  # noqa: PLC0415 the plugin's load: the API server's, at a request

    return PipelineAccess(get_auth_manager(), user)

"""The "Ingestion" page of the Airflow UI: every eos-ingest pipeline's lag, batches and checks.

The plugin that registers it is plugins/eos_ingest_plugin.py (found in Airflow's plugins folder and
through the wheel's ``airflow.plugins`` entry point); this module is the app it mounts. Wiring
only: the data comes from eos_ingest.service.status and .trends, the HTML from the Jinja2 templates
in eos_ingest/templates/ (autoescaped), the charts' SVG from page_charts. The API server mounts the
app at /eos-ingest (see docs/ui.md):

    /eos-ingest/                        every pipeline: lag, last batch, links (a broken file is a row)
    /eos-ingest/pipelines/<name>        one pipeline: charts of its lag and last batches, partitions
                                        and a page of batches
                                        (?batches=N, ?before=<id> older, ?after=<id> newer)
    /eos-ingest/api/pipelines/<name>    the same as JSON (eos_ingest.service.status.pipeline_status,
                                        the charts' data under "trends": service/trends.py)
    /eos-ingest/data-docs/<path>        the Great Expectations Data Docs site, read-only

Every endpoint requires a logged-in Airflow user (the session cookie of the UI, or a bearer token),
and shows a pipeline only to a user that Airflow's auth manager lets read its DAGs
(eos_ingest.airflow.page_access): the home page lists only those, the others answer 403.
Links are relative, so the pages work under the UI's iframe and behind a proxy's base path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import jinja2
from airflow.configuration import conf
from sqlalchemy.exc import SQLAlchemyError

from eos_ingest.airflow.page_access import PipelineAccess, forbidden_reason, request_access

if TYPE_CHECKING:
    from fastapi import FastAPI

    from eos_ingest.config.files import PipelineFile

URL_PREFIX = "/eos-ingest"
BATCHES_SHOWN = 20
# Data Docs pages are GX's HTML: they pull jQuery, Bootstrap and Vega from CDNs and a logo that
# reports the GX context's id. None of it is needed to read a report (the tables are static HTML),
# so the site is served sandboxed (no script, no form, an opaque origin: no cookie, no API call)
# and may load nothing but its own files.
DATA_DOCS_HEADERS = {
    "Content-Security-Policy": "sandbox; default-src 'none'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def build_app() -> FastAPI:
    """The FastAPI app; every route needs an authenticated Airflow user, and read access to a
    pipeline's DAGs to show anything of that pipeline."""
    # Not at the plugin's load, which every Airflow process that loads plugins pays (LazyApp): the
    # API server's modules and FastAPI, the pipeline files' config models, the Data Docs paths; the
    # plugin's load imports only what registering it needs (Airflow has loaded Jinja2 and SQLAlchemy).
    from airflow.api_fastapi.core_api.security import get_user, requires_authenticated  # noqa: PLC0415 the plugin's load
    from fastapi import Depends, FastAPI, HTTPException, Query, Request  # noqa: PLC0415 the plugin's load
    from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response  # noqa: PLC0415 the plugin's load
    from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: PLC0415 the plugin's load

    from eos_ingest.config import files as pipeline_files  # noqa: PLC0415 the plugin's load
    from eos_ingest.errors import ConfigError  # noqa: PLC0415 the plugin's load
    from eos_ingest.quality.data_docs import data_docs_root, resolve_data_docs_file  # noqa: PLC0415 the plugin's load
    from eos_ingest.redact import redact_tree  # noqa: PLC0415 the plugin's load

    require_user = requires_authenticated()

    user_dep = Depends(get_user)  # the user the login dependency resolved (cached per request)

    def user_access(user: Any = user_dep) -> PipelineAccess:
        return request_access(user)

    app = FastAPI(
        title="eos-ingest",
        dependencies=[Depends(require_user)],
        docs_url=None,  # the API docs routes would bypass the app's dependencies
        redoc_url=None,
        openapi_url=None,
    )
    # Tests override these two (app.dependency_overrides); the permission test runs them for real.
    app.state.require_user, app.state.user_access = require_user, user_access
    access_dep = Depends(user_access)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if request.url.path.removeprefix(request.scope.get("root_path", "")).startswith("/api/"):
            return JSONResponse({"detail": redact_tree(exc.detail)}, exc.status_code, headers=exc.headers)
        home = request.scope.get("root_path", "").removesuffix(URL_PREFIX) + "/"
        body = render("error.html", code=exc.status_code, message=str(exc.detail), home=home)
        return HTMLResponse(body, exc.status_code, headers=exc.headers)

    def load_status(
        name: str, batches: int, access: PipelineAccess, before: int | None = None, after: int | None = None
    ) -> dict[str, Any]:
        # Access first: a refusal must not tell whether the pipeline exists.
        if not access.may_read(name):
            raise HTTPException(403, forbidden_reason(name))
        try:
            file = pipeline_files.find_pipeline_file(name, pipelines_dir())
            if file is None:
                names = access.readable(f.name for f in pipeline_files.list_pipeline_files(pipelines_dir()))
                raise HTTPException(404, f"no pipeline {name!r}; known: {', '.join(sorted(names)) or 'none'}")
        except ConfigError as exc:  # no pipelines folder
            raise HTTPException(404, str(exc)) from exc
        try:
            return _status(file, batches, before=before, after=after, trends=True)
        except _Unavailable as exc:
            raise HTTPException(exc.code, str(exc)) from exc

    def data_docs_home(access: PipelineAccess) -> bool:
        """Whether to link the Data Docs home page: it exists and lists no pipeline hidden from the user."""
        return resolve_data_docs_file("index.html") is not None and access.may_read_whole_site(
            data_docs_root()
        )

    @app.get("/", response_class=HTMLResponse)
    async def index(access: PipelineAccess = access_dep) -> str:
        try:
            files = await asyncio.to_thread(pipeline_files.list_pipeline_files, pipelines_dir())
        except ConfigError as exc:
            return render("index.html", rows=[], error=str(exc), data_docs=False)
        readable = await asyncio.to_thread(access.readable, [f.name for f in files])
        files = [f for f in files if f.name in readable]  # the others are not even named
        # One thread each: a broker that is down costs one timeout for the page, not one per pipeline.
        rows = await asyncio.gather(*(asyncio.to_thread(_summary, f) for f in files))
        docs = await asyncio.to_thread(data_docs_home, access)
        return render("index.html", rows=rows, error=None, data_docs=docs)

    @app.get("/pipelines/{name}", response_class=HTMLResponse)
    async def pipeline_page(
        name: str,
        batches: int = Query(BATCHES_SHOWN, ge=1, le=500),
        before: int | None = Query(None, ge=1),
        after: int | None = Query(None, ge=0),
        access: PipelineAccess = access_dep,
    ) -> str:
        shown = await asyncio.to_thread(load_status, name, batches, access, before, after)
        docs = await asyncio.to_thread(data_docs_home, access)
        return render("pipeline.html", s=shown, batches=batches, data_docs=docs)

    @app.get("/api/pipelines/{name}")
    async def pipeline_json(
        name: str,
        batches: int = Query(BATCHES_SHOWN, ge=1, le=500),
        before: int | None = Query(None, ge=1),
        after: int | None = Query(None, ge=0),
        access: PipelineAccess = access_dep,
    ) -> dict[str, Any]:
        found = await asyncio.to_thread(load_status, name, batches, access, before, after)
        shown: dict[str, Any] = redact_tree(found)
        return shown

    @app.get("/data-docs/{path:path}")
    def data_docs(path: str, access: PipelineAccess = access_dep) -> FileResponse:  # sync: in a thread
        path, root = path or "index.html", data_docs_root()
        refused = HTTPException(403, f"you may not read the Data Docs page {path!r}: it shows a pipeline "
                                "whose DAGs you may not read")  # fmt: skip
        if not access.may_read_data_docs(path, root):  # before the lookup: a 404 would tell it exists
            raise refused
        file = resolve_data_docs_file(path)
        if file is None:
            raise HTTPException(404, f"no Data Docs page {path!r}")
        if not access.may_read_data_docs(file.relative_to(root).as_posix(), root):  # via a symlink
            raise refused
        return FileResponse(file, headers=DATA_DOCS_HEADERS)

    return app


def pipelines_dir() -> Path:
    """The DAGs' pipelines folder: $EOS_PIPELINES_DIR, else pipelines/ beside Airflow's DAGs folder."""
    from eos_ingest.config.pipeline import default_pipelines_dir  # noqa: PLC0415 the plugin's load: config models

    return default_pipelines_dir(Path(conf.get("core", "dags_folder")).absolute())


class LazyApp:
    """The plugin's ASGI app, built at its first request.

    Airflow imports plugin files in every process that loads plugins (task processes too, for
    macros); building the app at import would load FastAPI and the API server's modules there.
    """

    def __init__(self, factory: Callable[[], FastAPI]) -> None:
        self._factory = factory
        self._app: FastAPI | None = None

    @property
    def app(self) -> FastAPI:
        if self._app is None:
            self._app = self._factory()  # no I/O; two racing first requests build two, one stays
        return self._app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


# -- data, per pipeline ----------------------------------------------------------------------------


class _Unavailable(Exception):
    """A pipeline whose status cannot be read; `code` is the HTTP status to answer with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _status(
    file: PipelineFile,
    batches: int,
    *,
    before: int | None = None,
    after: int | None = None,
    trends: bool = False,
) -> dict[str, Any]:
    """pipeline_status of one file, with its Airflow Kafka connection merged as the DAG does; with
    `trends`, also its lag samples and last batches for the charts (service/trends.py)."""
    # Not at the plugin's load: the pipeline config, the control DB and the Kafka clients.
    from eos_ingest.connections.kafka import config_from_airflow  # noqa: PLC0415 the plugin's load
    from eos_ingest.errors import ConfigError, EosIngestError  # noqa: PLC0415 the plugin's load
    from eos_ingest.redact import redact_text  # noqa: PLC0415 the plugin's load
    from eos_ingest.service.status import pipeline_status, status_store  # noqa: PLC0415 the plugin's load
    from eos_ingest.service.trends import pipeline_trends  # noqa: PLC0415 the plugin's load

    if file.config is None:
        raise _Unavailable(422, file.error or "invalid pipeline file")
    try:
        config, _ = config_from_airflow(file.config)
    except ConfigError as exc:
        raise _Unavailable(422, str(exc)) from exc
    try:
        store = status_store(config.control_db_url)
        now = datetime.now(UTC)
        shown = pipeline_status(config, store, batches=batches, before=before, after=after, now=now)
        if trends:
            shown["trends"] = pipeline_trends(store, config.name, now)
        return shown
    except (EosIngestError, SQLAlchemyError) as exc:
        # SQLAlchemy's and the driver's messages may quote the URL: redacted before it is shown.
        raise _Unavailable(503, redact_text(f"control DB: {type(exc).__name__}: {exc}")) from exc


def _summary(file: PipelineFile) -> dict[str, Any]:
    try:
        return {"name": file.name, "status": _status(file, batches=1), "error": None}
    except _Unavailable as exc:
        return {"name": file.name, "status": None, "error": str(exc)}


# -- HTML --------------------------------------------------------------------------------------------

TEMPLATES_PACKAGE, TEMPLATES_FOLDER = "eos_ingest", "templates"  # eos_ingest/templates/*.html


@lru_cache(maxsize=1)
def _templates() -> jinja2.Environment:
    """The pages' Jinja2 environment: templates from the installed eos_ingest package (never the
    current directory), autoescaped, None shown as an em dash, an unknown name an error."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(TEMPLATES_PACKAGE, TEMPLATES_FOLDER),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=lambda value: "\u2014" if value is None else value,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # The charts and the tables format a figure with the same function, so they read the same.
    from eos_ingest.airflow import page_charts as charts  # noqa: PLC0415 the plugin's load (xml.etree)

    env.filters.update(
        num=charts.count_text, ts=charts.time_text, age=charts.age_text, unread=charts.unread_text,
        duration=charts.duration_text, quote=quote,
    )  # fmt: skip
    env.globals["pipeline_charts"] = charts.pipeline_charts
    return env


def render(template: str, **context: Any) -> str:
    """One page: index.html (rows, error, data_docs), pipeline.html (s, batches, data_docs) or
    error.html (code, message, home). Every value is redacted first (eos_ingest.redact): errors and
    batch rows may quote a URL or a setting."""
    from eos_ingest.redact import redact_tree  # noqa: PLC0415 the plugin's load

    return _templates().get_template(template).render(**redact_tree(context))

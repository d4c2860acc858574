"""Airflow UI plugin: an "Ingestion" page with every eos-ingest pipeline's lag, batches and checks.

Airflow loads it through the package's ``airflow.plugins`` entry point (pyproject.toml), so an
Airflow with eos-ingest installed has it; no file in the plugins folder (it would load it twice).
Wiring only: the data comes from eos_ingest.status, the HTML from the Jinja2 templates in
eos_ingest/templates/ (autoescaped). The API server mounts the app at /eos-ingest (see docs/ui.md):

    /eos-ingest/                        every pipeline: lag, last batch, links (a broken file is a row)
    /eos-ingest/pipelines/<name>        one pipeline: partitions and a page of batches
                                        (?batches=N, ?before=<id> older, ?after=<id> newer)
    /eos-ingest/api/pipelines/<name>    the same as JSON (eos_ingest.status.pipeline_status)
    /eos-ingest/data-docs/<path>        the Great Expectations Data Docs site, read-only

Every endpoint requires a logged-in Airflow user (the session cookie of the UI, or a bearer token).
Links are relative, so the pages work under the UI's iframe and behind a proxy's base path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.plugins_manager import AirflowPlugin

if TYPE_CHECKING:
    import jinja2
    from fastapi import FastAPI

    from eos_ingest.status import PipelineFile

URL_PREFIX = "/eos-ingest"
BATCHES_SHOWN = 20


def build_app() -> FastAPI:
    """The FastAPI app; every route needs an authenticated Airflow user."""
    from airflow.api_fastapi.core_api.security import requires_authenticated
    from fastapi import Depends, FastAPI, HTTPException, Query, Request
    from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
    from starlette.exceptions import HTTPException as StarletteHTTPException

    from eos_ingest import status
    from eos_ingest.errors import ConfigError
    from eos_ingest.redact import redact_tree

    require_user = requires_authenticated()
    app = FastAPI(
        title="eos-ingest",
        dependencies=[Depends(require_user)],
        docs_url=None,  # the API docs routes would bypass the app's dependencies
        redoc_url=None,
        openapi_url=None,
    )
    app.state.require_user = require_user  # tests override it (app.dependency_overrides)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if request.url.path.removeprefix(request.scope.get("root_path", "")).startswith("/api/"):
            return JSONResponse({"detail": redact_tree(exc.detail)}, exc.status_code, headers=exc.headers)
        home = request.scope.get("root_path", "").removesuffix(URL_PREFIX) + "/"
        body = render("error.html", code=exc.status_code, message=str(exc.detail), home=home)
        return HTMLResponse(body, exc.status_code, headers=exc.headers)

    def load_status(
        name: str, batches: int, before: int | None = None, after: int | None = None
    ) -> dict[str, Any]:
        try:
            file = status.find_pipeline_file(name, pipelines_dir())
            if file is None:
                known = ", ".join(f.name for f in status.list_pipeline_files(pipelines_dir())) or "none"
                raise HTTPException(404, f"no pipeline {name!r}; known: {known}")
        except ConfigError as exc:  # no pipelines folder
            raise HTTPException(404, str(exc)) from exc
        try:
            return _status(file, batches, before=before, after=after)
        except _Unavailable as exc:
            raise HTTPException(exc.code, str(exc)) from exc

    @app.get("/", response_class=HTMLResponse)
    async def index() -> str:
        try:
            files = await asyncio.to_thread(status.list_pipeline_files, pipelines_dir())
        except ConfigError as exc:
            return render("index.html", rows=[], error=str(exc), data_docs=False)
        # One thread each: a broker that is down costs one timeout for the page, not one per pipeline.
        rows = await asyncio.gather(*(asyncio.to_thread(_summary, f) for f in files))
        docs = status.resolve_data_docs_file("index.html") is not None
        return render("index.html", rows=rows, error=None, data_docs=docs)

    @app.get("/pipelines/{name}", response_class=HTMLResponse)
    async def pipeline_page(
        name: str,
        batches: int = Query(BATCHES_SHOWN, ge=1, le=500),
        before: int | None = Query(None, ge=1),
        after: int | None = Query(None, ge=0),
    ) -> str:
        shown = await asyncio.to_thread(load_status, name, batches, before, after)
        docs = status.resolve_data_docs_file("index.html") is not None
        return render("pipeline.html", s=shown, batches=batches, data_docs=docs)

    @app.get("/api/pipelines/{name}")
    async def pipeline_json(
        name: str,
        batches: int = Query(BATCHES_SHOWN, ge=1, le=500),
        before: int | None = Query(None, ge=1),
        after: int | None = Query(None, ge=0),
    ) -> dict[str, Any]:
        found = await asyncio.to_thread(load_status, name, batches, before, after)
        shown: dict[str, Any] = redact_tree(found)
        return shown

    @app.get("/data-docs/{path:path}")
    def data_docs(path: str) -> FileResponse:  # sync: FastAPI runs it in its thread pool
        file = status.resolve_data_docs_file(path or "index.html")
        if file is None:
            raise HTTPException(404, f"no Data Docs page {path!r}")
        return FileResponse(file)

    return app


def pipelines_dir() -> Path:
    """The DAGs' pipelines folder: $EOS_PIPELINES_DIR, else pipelines/ beside Airflow's DAGs folder."""
    from airflow.configuration import conf

    from eos_ingest.config import default_pipelines_dir

    return default_pipelines_dir(Path(conf.get("core", "dags_folder")).absolute())


class _LazyApp:
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


class EosIngestPlugin(AirflowPlugin):
    """Registers the status app and its entry in the UI's Browse menu (shown in an iframe)."""

    name = "eos_ingest"
    # Typed as AirflowPlugin declares them (instance attributes), which mypy requires of an override.
    fastapi_apps: list[Any] = [  # noqa: RUF012
        {"app": _LazyApp(build_app), "url_prefix": URL_PREFIX, "name": "eos-ingest status"}
    ]
    external_views: list[Any] = [  # noqa: RUF012
        {
            "name": "Ingestion",
            "href": URL_PREFIX.lstrip("/") + "/",  # relative to the UI's base URL
            "url_route": "eos-ingest",  # embed at <ui>/plugin/eos-ingest instead of a new tab
            "destination": "nav",
            "category": "browse",
        }
    ]


# -- data, per pipeline ----------------------------------------------------------------------------


class _Unavailable(Exception):
    """A pipeline whose status cannot be read; `code` is the HTTP status to answer with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _status(
    file: PipelineFile, batches: int, *, before: int | None = None, after: int | None = None
) -> dict[str, Any]:
    """pipeline_status of one file, with its Airflow Kafka connection merged as the DAG does."""
    from sqlalchemy.exc import SQLAlchemyError

    from eos_ingest.airflow_conn import config_from_airflow
    from eos_ingest.errors import ConfigError, EosIngestError
    from eos_ingest.redact import redact_text
    from eos_ingest.status import pipeline_status, status_store

    if file.config is None:
        raise _Unavailable(422, file.error or "invalid pipeline file")
    try:
        config, _ = config_from_airflow(file.config)
    except ConfigError as exc:
        raise _Unavailable(422, str(exc)) from exc
    try:
        store = status_store(config.control_db_url)
        return pipeline_status(config, store, batches=batches, before=before, after=after)
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
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader(TEMPLATES_PACKAGE, TEMPLATES_FOLDER),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=lambda value: "\u2014" if value is None else value,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=_num, ts=_ts, quote=quote)
    return env


def _num(value: int | None) -> str:
    return "\u2014" if value is None else f"{value:,}"


def _ts(value: str | None) -> str:
    return "\u2014" if value is None else value[:19].replace("T", " ") + " UTC"


def render(template: str, **context: Any) -> str:
    """One page: index.html (rows, error, data_docs), pipeline.html (s, batches, data_docs) or
    error.html (code, message, home). Every value is redacted first (eos_ingest.redact): errors and
    batch rows may quote a URL or a setting."""
    from eos_ingest.redact import redact_tree

    return _templates().get_template(template).render(**redact_tree(context))

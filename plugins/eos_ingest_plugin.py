"""Airflow UI plugin: an "Ingestion" page with every eos-ingest pipeline's lag, batches and checks.

Wiring and HTML only; the data comes from eos_ingest.status. The API server mounts the app at
/eos-ingest (see docs/ui.md):

    /eos-ingest/                        every pipeline: lag, last batch, links (a broken file is a row)
    /eos-ingest/pipelines/<name>        one pipeline: partitions and batches (?batches=N)
    /eos-ingest/api/pipelines/<name>    the same as JSON (eos_ingest.status.pipeline_status)
    /eos-ingest/data-docs/<path>        the Great Expectations Data Docs site, read-only

Every endpoint requires a logged-in Airflow user (the session cookie of the UI, or a bearer token).
Links are relative, so the pages work under the UI's iframe and behind a proxy's base path.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.plugins_manager import AirflowPlugin

if TYPE_CHECKING:
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
            return JSONResponse({"detail": exc.detail}, exc.status_code, headers=exc.headers)
        home = request.scope.get("root_path", "").removesuffix(URL_PREFIX) + "/"
        body = _error_page(exc.status_code, str(exc.detail), home)
        return HTMLResponse(body, exc.status_code, headers=exc.headers)

    def load_status(name: str, batches: int) -> dict[str, Any]:
        try:
            file = status.find_pipeline_file(name)
            if file is None:
                known = ", ".join(f.name for f in status.list_pipeline_files()) or "none"
                raise HTTPException(404, f"no pipeline {name!r}; known: {known}")
        except ConfigError as exc:  # no pipelines folder
            raise HTTPException(404, str(exc)) from exc
        try:
            return _status(file, batches)
        except _Unavailable as exc:
            raise HTTPException(exc.code, str(exc)) from exc

    @app.get("/", response_class=HTMLResponse)
    async def index() -> str:
        try:
            files = await asyncio.to_thread(status.list_pipeline_files)
        except ConfigError as exc:
            return _page("Ingestion", _error_box(str(exc)))
        # One thread each: a broker that is down costs one timeout for the page, not one per pipeline.
        rows = await asyncio.gather(*(asyncio.to_thread(_summary, f) for f in files))
        docs = status.resolve_data_docs_file("index.html") is not None
        return _page("Ingestion", _render_index(rows, docs))

    @app.get("/pipelines/{name}", response_class=HTMLResponse)
    async def pipeline_page(name: str, batches: int = Query(BATCHES_SHOWN, ge=1, le=500)) -> str:
        shown = await asyncio.to_thread(load_status, name, batches)
        docs = status.resolve_data_docs_file("index.html") is not None
        return _page(f"Ingestion: {name}", _render_pipeline(shown, batches, docs))

    @app.get("/api/pipelines/{name}")
    async def pipeline_json(name: str, batches: int = Query(BATCHES_SHOWN, ge=1, le=500)) -> dict[str, Any]:
        return await asyncio.to_thread(load_status, name, batches)

    @app.get("/data-docs/{path:path}")
    def data_docs(path: str) -> FileResponse:  # sync: FastAPI runs it in its thread pool
        file = status.resolve_data_docs_file(path or "index.html")
        if file is None:
            raise HTTPException(404, f"no Data Docs page {path!r}")
        return FileResponse(file)

    return app


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


def _status(file: PipelineFile, batches: int) -> dict[str, Any]:
    """pipeline_status of one file, with its Airflow Kafka connection merged as the DAG does."""
    from sqlalchemy.exc import SQLAlchemyError

    from eos_ingest.airflow_conn import config_from_airflow
    from eos_ingest.errors import ConfigError, EosIngestError
    from eos_ingest.status import pipeline_status, status_store

    if file.config is None:
        raise _Unavailable(422, file.error or "invalid pipeline file")
    try:
        config, _ = config_from_airflow(file.config)
    except ConfigError as exc:
        raise _Unavailable(422, str(exc)) from exc
    try:
        return pipeline_status(config, status_store(config.control_db_url), batches=batches)
    except (EosIngestError, SQLAlchemyError) as exc:
        raise _Unavailable(503, f"control DB: {type(exc).__name__}: {exc}") from exc


def _summary(file: PipelineFile) -> dict[str, Any]:
    try:
        return {"name": file.name, "status": _status(file, batches=1), "error": None}
    except _Unavailable as exc:
        return {"name": file.name, "status": None, "error": str(exc)}


# -- HTML --------------------------------------------------------------------------------------------

_CSS = """
:root { color-scheme: light dark; font: 14px/1.45 system-ui, sans-serif; }
body { margin: 1rem 1.5rem; }
h1 { font-size: 1.4rem; margin: 0 0 .75rem; } h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
table { border-collapse: collapse; margin: .25rem 0 1rem; }
th, td { border: 1px solid #8884; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #8882; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { border-radius: .6rem; padding: 0 .5rem; color: #fff; background: #777; white-space: nowrap; }
.committed, .passed { background: #2e7d32; } .failed { background: #c62828; }
.planned { background: #1565c0; } .abandoned { background: #6d4c41; }
.error { color: #c62828; white-space: pre-wrap; } .muted { color: #888; } .small { font-size: .85em; }
.box { border: 1px solid #c62828; border-radius: .3rem; padding: .5rem .75rem; margin: .5rem 0; }
dl { display: grid; grid-template-columns: max-content auto; gap: .15rem 1rem; } dt { color: #888; }
"""


def _e(value: object) -> str:
    """Escaped text of a value; None is an em dash."""
    return "\u2014" if value is None else html.escape(str(value))


def _num(value: int | None) -> str:
    return "\u2014" if value is None else f"{value:,}"


def _ts(value: str | None) -> str:
    return "\u2014" if value is None else _e(value[:19].replace("T", " ") + " UTC")


def _badge(value: str) -> str:
    return f'<span class="badge {_e(value)}">{_e(value)}</span>'


def _link(href: str, text: str) -> str:
    return f'<a href="{_e(href)}">{_e(text)}</a>'


def _table(headers: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    """A table of already-rendered (escaped) cells; headers are escaped here."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cells) + "</tr>" for cells in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _td(content: str, cls: str = "") -> str:
    return f'<td class="{cls}">{content}</td>' if cls else f"<td>{content}</td>"


def _error_box(message: str) -> str:
    return f'<div class="box error">{_e(message)}</div>'


def _page(title: str, body: str) -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{_CSS}</style></head><body>{body}</body></html>"
    )


def _error_page(code: int, message: str, home: str) -> str:
    hint = ""
    if code == 401:
        hint = f"<p>Log in to {_link(home, 'Airflow')} first; this page uses its session.</p>"
    body = f"<h1>{code}</h1>{_error_box(message)}{hint}<p>{_link(home, 'Airflow home')}</p>"
    return _page(f"Ingestion: {code}", body)


def _dq_cell(batch: dict[str, Any], to_root: str) -> str:
    if batch["dq_success"] is None:
        return "\u2014"
    parts = [_badge("passed" if batch["dq_success"] else "failed")]
    if batch["dq_stage"]:
        parts.append(f'<span class="muted small">{_e(batch["dq_stage"])}</span>')
    if batch["dq_report_docs_path"]:
        parts.append(_link(f"{to_root}data-docs/{quote(batch['dq_report_docs_path'])}", "report"))
    elif batch["dq_report_path"]:
        parts.append(f'<span class="muted small">{_e(batch["dq_report_path"])}</span>')
    items = [f'<li class="error">{_e(f)}</li>' for f in batch["dq_critical_failures"]]
    items += [f'<li class="muted">{_e(w)}</li>' for w in batch["dq_warnings"]]
    if items:
        parts.append(f'<ul class="small">{"".join(items)}</ul>')
    return " ".join(parts)


def _render_index(rows: list[dict[str, Any]], data_docs: bool) -> str:
    table_rows = []
    for row in rows:
        name, shown = row["name"], row["status"]
        if shown is None:
            table_rows.append([_td(_e(name)), f'<td colspan="5" class="error">{_e(row["error"])}</td>'])
            continue
        lag = _num(shown["total_lag"])
        if shown["kafka_error"]:
            lag = f'no Kafka offsets<div class="error small">{_e(shown["kafka_error"])}</div>'
        last = shown["batches"][0] if shown["batches"] else None
        last_cell = "no batches yet"
        if last is not None:
            last_cell = f"#{_e(last['batch_id'])} {_badge(last['status'])} {_e(last['kind'])}"
            last_cell += f'<div class="muted small">{_ts(last["created_at"])}</div>'
        links = [_link(f"pipelines/{quote(name)}", "details"), _link(f"api/pipelines/{quote(name)}", "JSON")]
        if last is not None and last["dq_report_docs_path"]:
            links.append(_link(f"data-docs/{quote(last['dq_report_docs_path'])}", "last DQ report"))
        table_rows.append(
            [
                _td(_link(f"pipelines/{quote(name)}", name)),
                _td(_e(", ".join(shown["topics"]))),
                _td(_e(shown["schedule"] or "manual")),
                _td(lag, "num"),
                _td(last_cell),
                _td(" \u00b7 ".join(links)),
            ]
        )
    headers = ["Pipeline", "Topics", "Schedule", "Lag (offsets)", "Last batch", "Links"]
    table = _table(headers, table_rows) if rows else "<p>No pipeline files (pipelines/*.yaml).</p>"
    footer = f"<p>{_link('data-docs/index.html', 'Data Docs: every validation')}</p>" if data_docs else ""
    return f"<h1>Ingestion</h1>{table}{footer}"


def _render_pipeline(shown: dict[str, Any], batches: int, data_docs: bool) -> str:
    name = shown["pipeline"]
    facts = {
        "Topics": ", ".join(shown["topics"]),
        "Schedule": shown["schedule"] or "manual",
        "New partitions start at": shown["start_from"],
        "Max records per partition and batch": f"{shown['max_records_per_partition']:,}",
        "Kafka": shown["bootstrap_servers"],
        "Output table": shown["output_path"],
        "Quarantine table": shown["quarantine_path"],
        "Control DB": shown["control_db"],
    }
    summary = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts.items())
    links = [
        _link("../", "\u2190 all pipelines"),
        _link(f"../api/pipelines/{quote(name)}?batches={batches}", "JSON"),
    ]
    if data_docs:
        links.append(_link("../data-docs/index.html", "Data Docs"))
    nav = " \u00b7 ".join(links)
    kafka = _error_box(f"Kafka offsets unavailable: {shown['kafka_error']}") if shown["kafka_error"] else ""
    partition_rows = [
        [
            _td(_e(p["topic"])),
            _td(_e(p["partition"]), "num"),
            _td(_num(p["committed_offset"]), "num"),
            _td(_num(p["log_start"]), "num"),
            _td(_num(p["last_stable_offset"]), "num"),
            _td(_num(p["lag"]), "num"),
            _td(_e(p["note"] or "")),
        ]
        for p in shown["partitions"]
    ]
    partition_headers = ["Topic", "Partition", "Committed", "Log start", "Last stable", "Lag", "Note"]
    partitions = (
        _table(partition_headers, partition_rows) if partition_rows else "<p>No partition known yet.</p>"
    )
    batch_rows = []
    for b in shown["batches"]:
        ranges = "<br>".join(
            f"{_e(r['topic'])}[{_e(r['partition'])}] [{_num(r['start'])}, {_num(r['end'])})"
            for r in b["ranges"]
        )
        text = "".join(
            f'<div class="{cls}">{_e(value)}</div>' for cls, value in (("error", b["error"]), ("muted", b["note"]))
            if value
        )  # fmt: skip
        batch_rows.append(
            [
                _td(_e(b["batch_id"]), "num"),
                _td(_e(b["kind"])),
                _td(_badge(b["status"])),
                _td(_e(b["fence"]), "num"),
                _td(f"{_ts(b['created_at'])}<div class='muted small'>{_ts(b['committed_at'])}</div>"),
                _td(_num(b["records_read"]), "num"),
                _td(_num(b["records_written"]), "num"),
                _td(_num(b["records_quarantined"]), "num"),
                _td(_num(b["delta_version"]), "num"),
                _td(_dq_cell(b, "../")),
                _td(f'<span class="small">{ranges}</span>'),
                _td(text),
            ]
        )
    batch_headers = ["Batch", "Kind", "Status", "Fence", "Created / committed", "Read", "Written",
                     "Quarantined", "Delta version", "Data quality", "Ranges", "Error / note"]  # fmt: skip
    batch_table = _table(batch_headers, batch_rows) if batch_rows else "<p>No batches yet.</p>"
    wider = min(500, batches * 5)
    more = (
        f"<p>{_link(f'?batches={wider}', f'show the last {wider}')}</p>"
        if len(batch_rows) == batches < 500
        else ""
    )
    return (
        f"<h1>Ingestion: {_e(name)}</h1><p>{nav}</p><dl>{summary}</dl>{kafka}"
        f"<h2>Partitions</h2>{partitions}<h2>Last batches</h2>{batch_table}{more}"
    )

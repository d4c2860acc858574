"""The Airflow UI plugin: registration, auth, pages, JSON, Data Docs serving, with the broker down.

The control DB is a real SQLite file with real batches; Kafka is a closed port, so every status
renders its DB part and a kafka_error (what a status page must do while the broker is down).
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
import json
import re
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import markupsafe
import pytest
import yaml
from fastapi.testclient import TestClient

from eos_ingest import paths
from eos_ingest.control.store import ControlStore
from eos_ingest.plan.ranges import Plan, PlannedRange, TopicPartition
from eos_ingest.quality import data_docs
from eos_ingest.service import status
from tests.helpers import page_users
from tests.helpers.page_charts import figures, latest
from tests.helpers.ports import free_port

XSS = "<script>alert('x')</script>"
TEMPLATES = paths.PACKAGE_DIR / "templates"


def declared_entry_point() -> importlib.metadata.EntryPoint:
    """The plugin's `airflow.plugins` entry point as pyproject.toml declares it."""
    pyproject = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())
    ((name, value),) = pyproject["project"]["entry-points"]["airflow.plugins"].items()
    return importlib.metadata.EntryPoint(name=name, value=value, group="airflow.plugins")


@pytest.fixture(scope="module")
def plugin_class() -> type:
    """The plugin, reached the way Airflow's plugins manager does: entry_point.load()."""
    cls: type = declared_entry_point().load()
    return cls


@pytest.fixture(scope="module")
def plugin() -> ModuleType:
    """The module of the app the plugin mounts (its pages, templates and JSON)."""
    from eos_ingest.airflow import ingestion_page

    return ingestion_page


@pytest.fixture(scope="module")
def client(plugin: ModuleType) -> TestClient:
    """The app with its authentication dependency overridden (the auth test uses the real one)."""
    app = plugin.build_app()
    app.dependency_overrides[app.state.require_user] = lambda: None
    app.dependency_overrides[app.state.user_access] = page_users.viewer
    return TestClient(app)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """pipelines/ with demo.yaml (two batches), a broken bad.yaml, and a Data Docs site."""
    state, folder = tmp_path / "state", tmp_path / "pipelines"
    folder.mkdir()
    monkeypatch.setenv("EOS_STATE_DIR", str(state))
    monkeypatch.setenv("EOS_PIPELINES_DIR", str(folder))
    monkeypatch.setattr(status, "KAFKA_TIMEOUT_S", 0.5)
    db_url = f"sqlite:///{tmp_path / 'control.db'}"
    demo = {
        "name": "demo",
        "topics": ["orders"],
        "kafka": {"bootstrap.servers": f"127.0.0.1:{free_port()}"},  # nothing listens there
        "kafka_conn_id": None,  # no Airflow connection lookup in a unit test
        "value": {"format": "raw"},
        "control_db_url": db_url,
        "schedule": "@hourly",
    }
    (folder / "demo.yaml").write_text(yaml.safe_dump(demo))
    (folder / "bad.yaml").write_text(yaml.safe_dump({"name": XSS, "topics": ["orders"]}))

    docs = state / "gx" / "data_docs"
    report = docs / "validations" / "demo" / "batch_1.html"
    report.parent.mkdir(parents=True)
    report.write_text("<html>batch 1 report</html>")
    (docs / "index.html").write_text("<html>docs index</html>")
    (state / "gx" / "secret.json").write_text("{}")  # beside the site: never served

    store = ControlStore(db_url)
    store.ensure_schema()
    first = Plan(ranges=(PlannedRange("orders", 0, 0, 10),), new_partitions=(TopicPartition("orders", 0),))
    b1, _ = store.plan_scheduled("demo", lambda committed: first)
    assert b1 is not None
    store.commit_batch(
        b1.batch_id, store.take_fence(b1.batch_id), records_read=10, records_written=9,
        records_quarantined=1, delta_version=3, quarantine_delta_version=0,
    )  # fmt: skip
    report_json = json.dumps({"stage": "audit", "critical_failures": [], "warnings": [f"warn {XSS}"]})
    store.record_quality(b1.batch_id, success=True, result_json=report_json, report_path=str(report))
    b2, _ = store.plan_scheduled("demo", lambda committed: Plan(ranges=(PlannedRange("orders", 0, 10, 15),)))
    assert b2 is not None
    store.fail_batch(b2.batch_id, store.take_fence(b2.batch_id), f"ReadError: {XSS}")
    yield {"folder": folder, "state": state, "docs": docs, "b1": b1.batch_id, "b2": b2.batch_id}
    store.close()


# The pages' one script (base.html): fixed text at the end of the body, no value rendered into it.
OWN_SCRIPT = re.compile(r"<script>\n// A copy button [^<]*</script>\n</body></html>\Z")


def assert_escaped(page: str) -> None:
    rest, own = OWN_SCRIPT.subn("", page)
    assert own == 1, "the page lost its own script, or it moved from the end of the body"
    assert "<script" not in rest, "an unescaped <script> reached the page"


def test_plugin_registers_the_app_under_eos_ingest_and_a_nav_entry(plugin_class: type) -> None:
    from airflow.api_fastapi.app import RESERVED_URL_PREFIXES
    from airflow.api_fastapi.core_api.datamodels.plugins import ExternalViewResponse
    from airflow.plugins_manager import is_valid_plugin

    cls: Any = plugin_class
    assert is_valid_plugin(cls) and cls.name == "eos_ingest"
    (app,) = cls.fastapi_apps
    assert app["url_prefix"] == "/eos-ingest" and app["name"] and callable(app["app"])
    assert not any(app["url_prefix"].startswith(p) for p in RESERVED_URL_PREFIXES)
    (view,) = cls.external_views
    parsed = ExternalViewResponse.model_validate(view)  # what /api/v2/plugins serves to the UI
    assert (parsed.name, parsed.destination, parsed.category) == ("Ingestion", "nav", "browse")
    assert parsed.href == "eos-ingest/"  # relative: resolves under the UI's base URL
    assert parsed.url_route == "eos-ingest"


@pytest.mark.parametrize("path", ["/", "/pipelines/demo", "/api/pipelines/demo", "/data-docs/index.html"])
def test_registered_app_refuses_requests_without_an_airflow_login(
    plugin_class: Any, site: dict[str, Any], path: str
) -> None:
    response = TestClient(plugin_class.fastapi_apps[0]["app"]).get(path)
    assert response.status_code == 401
    if path.startswith("/api/"):
        assert response.json() == {"detail": "Not authenticated"}
    else:
        assert "Log in to" in response.text


def test_index_lists_every_pipeline_and_a_broken_file_as_an_escaped_error_row(
    client: TestClient, site: dict[str, Any]
) -> None:
    response = client.get("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    page = response.text
    assert_escaped(page)
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page  # bad.yaml's error, escaped
    assert '<a href="pipelines/demo">demo</a>' in page
    assert "no Kafka offsets" in page and "KafkaUnavailableError" in page
    assert f"#{site['b2']}" in page and "failed" in page  # the last batch
    assert 'href="api/pipelines/demo"' in page and 'href="data-docs/index.html"' in page


def test_pipeline_page_shows_partitions_batches_and_links_the_data_docs_report(
    client: TestClient, site: dict[str, Any]
) -> None:
    response = client.get("/pipelines/demo")
    assert response.status_code == 200
    page = response.text
    assert_escaped(page)
    assert "ReadError: &lt;script&gt;" in page and "warn &lt;script&gt;" in page
    assert 'href="../data-docs/validations/demo/batch_1.html"' in page
    assert re.search(r"<td>orders</td><td class=\"num\">0</td><td class=\"num\">10</td>", page)
    assert "Kafka offsets unavailable" in page
    assert 'class="pager"' not in page  # two batches: one page, no page links
    for batch_id in (site["b1"], site["b2"]):
        assert f'<td class="num">{batch_id}</td>' in page


def test_json_endpoint_returns_the_db_part_and_a_kafka_error_when_the_broker_is_down(
    client: TestClient, site: dict[str, Any]
) -> None:
    response = client.get("/api/pipelines/demo")
    assert response.status_code == 200
    body = response.json()
    assert body["pipeline"] == "demo" and body["topics"] == ["orders"]
    assert body["kafka_error"].startswith("KafkaUnavailableError") and body["total_lag"] is None
    assert body["partitions"] == [
        {"topic": "orders", "partition": 0, "committed_offset": 10, "log_start": None,
         "last_stable_offset": None, "lag": None, "note": None, "oldest_unread_timestamp": None,
         "oldest_unread_age_s": None, "oldest_unread_unknown": True},
    ]  # fmt: skip
    assert body["oldest_unread_age_s"] is None and body["oldest_unread_error"].startswith("no Kafka offsets")
    failed, committed = body["batches"]
    assert (failed["batch_id"], failed["status"]) == (site["b2"], "failed")
    assert failed["error"] == f"ReadError: {XSS}"  # JSON is data: not escaped
    assert failed["ranges"] == [{"topic": "orders", "partition": 0, "start": 10, "end": 15}]
    assert committed["status"] == "committed" and committed["committed_at"]
    counts = [committed[f"records_{k}"] for k in ("read", "written", "quarantined")]
    assert counts == [10, 9, 1]
    assert committed["delta_version"] == 3 and committed["dq_success"] is True
    assert committed["dq_report_docs_path"] == "validations/demo/batch_1.html"
    last_only = client.get("/api/pipelines/demo?batches=1").json()["batches"]
    assert [b["batch_id"] for b in last_only] == [site["b2"]]


@pytest.mark.parametrize("path", ["/pipelines/nope", "/api/pipelines/nope", "/pipelines/..%2Fdemo"])
def test_unknown_pipeline_is_404(client: TestClient, site: dict[str, Any], path: str) -> None:
    assert client.get(path).status_code == 404


def test_broken_pipeline_file_is_422_with_its_error_escaped(client: TestClient, site: dict[str, Any]) -> None:
    page = client.get("/pipelines/bad")
    assert page.status_code == 422 and "&lt;script&gt;" in page.text
    assert_escaped(page.text)
    assert f"name = {XSS!r} is not valid" in client.get("/api/pipelines/bad").json()["detail"]


def test_unreachable_control_db_is_an_error_row_not_a_500(client: TestClient, site: dict[str, Any]) -> None:
    folder = site["folder"]
    (folder.parent / "a_folder.db").mkdir()  # SQLite cannot open a folder as a database
    doc = yaml.safe_load((folder / "demo.yaml").read_text())
    doc.update(name="nodb", control_db_url=f"sqlite:///{folder.parent / 'a_folder.db'}")
    (folder / "nodb.yaml").write_text(yaml.safe_dump(doc))
    index = client.get("/")
    assert index.status_code == 200 and "control DB: ControlStoreUnavailableError" in index.text
    assert client.get("/api/pipelines/nodb").status_code == 503


def test_missing_pipelines_folder_renders_the_error(
    client: TestClient, site: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EOS_PIPELINES_DIR", str(site["folder"] / "missing"))
    index = client.get("/")
    assert index.status_code == 200 and "does not exist" in index.text
    assert client.get("/pipelines/demo").status_code == 404


def test_data_docs_serves_files_under_the_site_folder(client: TestClient, site: dict[str, Any]) -> None:
    assert data_docs.data_docs_root() == site["docs"].resolve()
    page = client.get("/data-docs/validations/demo/batch_1.html")
    assert page.status_code == 200 and page.text == "<html>batch 1 report</html>"
    assert page.headers["content-type"].startswith("text/html")
    assert client.get("/data-docs/").text == "<html>docs index</html>"


@pytest.mark.parametrize(
    "path",
    [
        "/data-docs/%2e%2e/secret.json",  # encoded, so the client does not normalise it away
        "/data-docs/validations/%2e%2e/%2e%2e/secret.json",
        "/data-docs/..%2Fsecret.json",
        "/data-docs/validations/%2e%2e/index.html",  # inside the root, but any `..` is refused
        "/data-docs//etc/passwd",
        "/data-docs/validations",  # a folder
        "/data-docs/missing.html",
        "/data-docs/link.html",  # a symlink out of the root
    ],
)
def test_data_docs_refuses_traversal_and_anything_outside_the_site(
    client: TestClient, site: dict[str, Any], path: str
) -> None:
    (site["docs"] / "link.html").symlink_to(site["state"] / "gx" / "secret.json")
    response = client.get(path)
    assert response.status_code == 404, response.text
    assert "no Data Docs page" in response.text  # refused by the endpoint, not just unrouted


def poisoned(value: Any) -> Any:
    """`value` with every string inside it prefixed by markup that closes an attribute and opens a script."""
    if isinstance(value, str):
        return f"\"'><script>alert(1)</script>{value}"
    if isinstance(value, list):
        return [poisoned(v) for v in value]
    if isinstance(value, dict):
        return {k: poisoned(v) for k, v in value.items()}
    return value


def test_every_text_of_a_status_is_escaped_on_both_pages(
    plugin: ModuleType, client: TestClient, site: dict[str, Any]
) -> None:
    """Names, topics, paths, errors, notes, DQ failures, timestamps: any of them can carry markup."""
    shown = poisoned(client.get("/api/pipelines/demo").json())
    shown["kafka_error"] = None  # the Kafka columns and notes too
    shown["partitions"] = poisoned(
        [{"topic": "orders", "partition": 0, "committed_offset": 10, "log_start": 0,
          "last_stable_offset": 12, "lag": 2, "note": "note", "oldest_unread_unknown": False,
          "oldest_unread_timestamp": "2026-11-25T11:58:30+00:00", "oldest_unread_age_s": 90.0}]
    )  # fmt: skip
    shown["batches"][0]["dq_success"] = False
    shown["batches"][0]["dq_critical_failures"] = poisoned(["critical"])
    shown["trends"]["lag"] = poisoned(
        [{"at": "2026-11-25T11:00:00+00:00", "ago_s": 3600.0, "samples": 1, "lag_records": 3, "oldest_unread_age_s": 9.0}]
    )  # fmt: skip
    pages = {
        "pipeline": plugin.render("pipeline.html", s=shown, batches=2, data_docs=True),
        "index": plugin.render(
            "index.html",
            rows=[
                {"name": poisoned("demo"), "status": shown, "error": None},
                {"name": poisoned("bad"), "status": None, "error": poisoned("error")},
            ],
            error=None,
            data_docs=True,
        ),
        "index, no folder": plugin.render("index.html", rows=[], error=poisoned("folder"), data_docs=False),
        "error": plugin.render("error.html", code=401, message=poisoned("detail"), home=poisoned("/")),
    }
    for name, page in pages.items():
        assert_escaped(page)
        assert "&lt;script&gt;" in page, name
        assert "\"'>" not in page, name  # no attribute closed by a value
    failed = shown["batches"][0]
    for text in (shown["partitions"][0]["note"], failed["dq_critical_failures"][0], failed["error"]):
        assert str(markupsafe.escape(text)) in pages["pipeline"]  # shown, as text
    # The charts' labels too: each chart parses, and a tooltip holds the poisoned values as text.
    tips = [t.text or "" for chart in figures(pages["pipeline"]).values() for t in chart.iter("title")]
    assert len(figures(pages["pipeline"])) == 5
    newest = shown["trends"]["batches"][-1]
    assert f"batch {newest['batch_id']} ({newest['kind']}, {newest['status']})" in "\n".join(tips)
    assert any(tip.startswith(shown["trends"]["lag"][0]["at"][:19]) for tip in tips)


def test_templates_load_from_the_package_whatever_the_working_directory(
    plugin: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "error.html").write_text("not ours")
    plugin._templates.cache_clear()
    page = plugin.render("error.html", code=404, message="gone", home="/")
    assert "not ours" not in page and "<h1>404</h1>" in page
    assert plugin._templates().get_template("error.html").filename == str(TEMPLATES / "error.html")


def test_every_template_is_package_data() -> None:
    """pip install puts the templates beside eos_ingest (pyproject's package-data), or the pages 500."""
    pyproject = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["eos_ingest"]
    files = sorted(TEMPLATES.rglob("*.html"))
    assert files, TEMPLATES
    for file in files:
        relative = file.relative_to(TEMPLATES.parent).as_posix()
        assert any(fnmatch.fnmatch(relative, g) for g in globs), f"{relative} is not in {globs}"


def test_a_failed_batch_stands_out_with_its_error_and_the_way_out(
    client: TestClient, site: dict[str, Any]
) -> None:
    page = client.get("/pipelines/demo").text
    failed = re.search(rf'<tr id="batch-{site["b2"]}" class="([^"]*)">(.*?)</tr>', page, re.S)
    committed = re.search(rf'<tr id="batch-{site["b1"]}"( class="[^"]*")?>(.*?)</tr>', page, re.S)
    assert failed and committed, page
    assert "batch-failed" in failed.group(1) and not committed.group(1)
    assert "ReadError: &lt;script&gt;" in failed.group(2) and "Way out" in failed.group(2)
    assert "eos-ingest run --pipeline demo" in failed.group(2) and "eos_ingest__demo" in failed.group(2)
    assert "Way out" not in committed.group(2)


def test_a_backfill_left_planned_past_the_bound_is_named_with_what_it_holds_back_and_the_way_out(
    client: TestClient, site: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    db_url = yaml.safe_load((site["folder"] / "demo.yaml").read_text())["control_db_url"]
    store = ControlStore(db_url)
    killed = store.create_backfill("demo", [PlannedRange("orders", 0, 2, 8)], reason="replay")
    store.take_fence(killed.batch_id)  # its job took a fence, then was killed
    assert 'id="stale-batches"' not in client.get("/pipelines/demo").text  # younger than 12 h

    monkeypatch.setenv("EOS_STALE_BATCH_HOURS", "0")
    page = client.get("/pipelines/demo").text
    box = re.search(r'<div class="box error" id="stale-batches">(.*?)</div>', page, re.S)
    assert box, page
    for part in (
        f'<a href="#batch-{killed.batch_id}">batch {killed.batch_id}</a> (backfill)',
        "keep 168 hours",
        "VACUUM lock",
        f"eos-ingest backfill --pipeline demo --resume {killed.batch_id}",
        f"eos-ingest abandon --pipeline demo --batch-id {killed.batch_id}",
    ):
        assert part in box.group(1), box.group(1)
    shown = client.get("/api/pipelines/demo").json()
    assert [s["batch_id"] for s in shown["stale_batches"]] == [killed.batch_id]
    store.close()


@pytest.mark.parametrize(
    ("error", "status", "way"),
    [
        ("OffsetsLostError: orders[0] offsets [0, 5) deleted", "failed", "--allow-data-loss"),
        ("TopicRecreatedError: orders id changed", "failed", "reset-offsets --pipeline demo --topic orders --to earliest"),
        ("ReadError: broker gone", "planned", "abandon --pipeline demo --batch-id 7"),
    ],
)  # fmt: skip
def test_the_way_out_fits_the_error(plugin: ModuleType, error: str, status: str, way: str) -> None:
    batch = {"batch_id": 7, "status": status, "error": error, "ranges": [{"topic": "orders"}]}
    page = plugin._templates().get_template("actions.html").module.way_out(batch, "demo")
    assert way in str(page)


def test_each_partition_offers_its_committed_range_as_a_backfill(
    client: TestClient, site: dict[str, Any]
) -> None:
    page = client.get("/pipelines/demo").text
    hint = re.search(r'<details class="backfill small">(.*?)</details>', page, re.S)
    assert hint, page
    conf = json.loads(
        re.search(r'<pre class="conf" id="conf-orders-0">(.*?)</pre>', hint.group(1), re.S).group(1)
    )
    assert conf == {"topic": "orders", "partitions": [0], "start_offset": 0, "end_offset": 10, "reason": ""}
    # A link to the backfill DAG's page (Airflow's base URL is two levels up) and a copy button.
    assert '<a href="../../dags/eos_backfill__demo" data-airflow-route>eos_backfill__demo</a>' in hint.group(
        1
    )
    assert '<button type="button" class="copy" data-copy="conf-orders-0">copy</button>' in hint.group(1)
    assert (
        "eos-ingest backfill --pipeline demo --topic orders --partitions 0 --start-offset 0 --end-offset 10"
        in hint.group(1)
    )


# -- permissions: what the auth manager lets a user read (eos_ingest.airflow.page_access) -------------------

DEMO_DAGS = ("eos_ingest__demo", "eos_backfill__demo")


def client_as(plugin: ModuleType, access: Any) -> TestClient:
    """The app as one user sees it: login overridden, the access decided by `access`."""
    app = plugin.build_app()
    app.dependency_overrides[app.state.require_user] = lambda: None
    app.dependency_overrides[app.state.user_access] = lambda: access
    return TestClient(app)


def test_index_lists_only_pipelines_whose_two_dags_the_user_may_read(
    plugin: ModuleType, site: dict[str, Any]
) -> None:
    page = client_as(plugin, page_users.reader_of(*DEMO_DAGS)).get("/").text
    assert '<a href="pipelines/demo">demo</a>' in page
    assert "pipelines/bad" not in page and "&lt;script&gt;" not in page  # bad.yaml: not even its error
    ingest_only = client_as(plugin, page_users.reader_of("eos_ingest__demo")).get("/").text
    nothing = client_as(plugin, page_users.no_role()).get("/").text
    for hidden in (ingest_only, nothing):
        assert "pipelines/demo" not in hidden and "pipelines/bad" not in hidden
        assert "data-docs/index.html" not in hidden  # the site's home lists demo's runs


@pytest.mark.parametrize("path", ["/pipelines/demo", "/api/pipelines/demo", "/pipelines/nope"])
def test_a_pipeline_the_user_may_not_read_is_403_with_one_line_and_no_data(
    plugin: ModuleType, site: dict[str, Any], path: str
) -> None:
    from eos_ingest.airflow.page_access import forbidden_reason

    name = path.rsplit("/", 1)[1]
    response = client_as(plugin, page_users.reader_of("eos_ingest__other", "eos_backfill__other")).get(path)
    assert response.status_code == 403
    body = response.json()["detail"] if path.startswith("/api/") else response.text
    reason = forbidden_reason(name)
    assert "\n" not in reason and (reason if path.startswith("/api/") else markupsafe.escape(reason)) in body
    for data in (
        "orders",
        "ReadError",
        "pipelines/bad",
        "&lt;script",
        "pipelines/other",
        "__other",
        f">{site['b2']}<",
    ):
        assert data not in body, data  # no batch, topic or other pipeline's name; nope's 403 = demo's


def test_unknown_pipeline_404_names_only_pipelines_the_user_may_read(
    plugin: ModuleType, site: dict[str, Any]
) -> None:
    access = page_users.reader_of(*DEMO_DAGS, "eos_ingest__nope", "eos_backfill__nope")
    response = client_as(plugin, access).get("/api/pipelines/nope")
    assert response.status_code == 404 and response.json()["detail"] == "no pipeline 'nope'; known: demo"


def test_data_docs_of_a_pipeline_the_user_may_not_read_are_403(
    plugin: ModuleType, site: dict[str, Any]
) -> None:
    (site["docs"] / "static").mkdir()
    (site["docs"] / "static" / "style.css").write_text("body {}")
    (site["docs"] / "expectations").mkdir()
    (site["docs"] / "expectations" / "demo.html").write_text("<html>demo suite</html>")
    other = client_as(plugin, page_users.reader_of("eos_ingest__other", "eos_backfill__other"))
    for path in ("validations/demo/batch_1.html", "expectations/demo.html", "index.html", "", "missing.html"):
        response = other.get(f"/data-docs/{path}")
        assert response.status_code == 403 and "docs index" not in response.text, path
    assert other.get("/data-docs/static/style.css").status_code == 200  # the site's shared assets
    demo = client_as(plugin, page_users.reader_of(*DEMO_DAGS))
    for path in ("validations/demo/batch_1.html", "expectations/demo.html", "index.html"):
        assert demo.get(f"/data-docs/{path}").status_code == 200, path
    (site["docs"] / "validations" / "beta").mkdir()  # another pipeline's runs: now on the home page
    assert demo.get("/data-docs/index.html").status_code == 403


def test_data_docs_are_served_sandboxed_and_may_load_nothing_from_elsewhere(
    client: TestClient, site: dict[str, Any]
) -> None:
    response = client.get("/data-docs/validations/demo/batch_1.html")
    assert response.status_code == 200
    policy = {d.split()[0]: d.split()[1:] for d in response.headers["content-security-policy"].split("; ")}
    assert policy["sandbox"] == []  # no script, no form, no popup, an opaque origin
    assert policy["default-src"] == ["'none'"] and policy["frame-ancestors"] == ["'self'"]
    for directive, sources in policy.items():
        assert not any(s.startswith(("http", "*")) or (s.endswith(":") and s != "data:") for s in sources), (
            directive
        )
    assert "script-src" not in policy  # default-src 'none': GX's CDN scripts are blocked
    assert response.headers["x-content-type-options"] == "nosniff"


def test_the_page_shows_each_table_with_its_files_size_and_last_maintenance(
    client: TestClient, site: dict[str, Any]
) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from eos_ingest.config.pipeline import load_pipeline

    config = load_pipeline(site["folder"] / "demo.yaml")
    for n in range(3):  # three commits, three files
        write_deltalake(
            str(config.output_path), pa.table({"kafka_offset": pa.array([n], pa.int64())}), mode="append"
        )

    page = client.get("/pipelines/demo").text

    row = re.search(r"<tr><td>output</td>(.*?)</tr>", page, re.S)
    assert row is not None, page
    assert '<td class="num">2</td><td class="num">3</td>' in row.group(1)  # version 2, 3 files
    assert "none yet" in row.group(1)
    assert re.search(r"<tr><td>quarantine</td><td colspan=\"4\" class=\"muted\">not written yet", page)


# -- charts: the lag samples and the last batches (eos_ingest.service.trends, airflow/page_charts.py) ----


def test_the_page_charts_the_recorded_lag_and_the_last_batches_as_its_tables_show_them(
    client: TestClient, site: dict[str, Any]
) -> None:
    from eos_ingest.config.pipeline import load_pipeline
    from eos_ingest.control.store import LagSample
    from eos_ingest.service.trends import LagSource

    store = ControlStore(load_pipeline(site["folder"] / "demo.yaml").control_db_url)
    now = datetime.now(UTC).replace(microsecond=0)
    store.record_lag_sample("demo", LagSample(now - timedelta(hours=2), LagSource.PLAN, 30, None))
    store.record_lag_sample("demo", LagSample(now - timedelta(hours=1), LagSource.CHECK_LAG, 12, 40.0))
    store.record_lag_sample(
        "demo", LagSample(now - timedelta(hours=30), LagSource.PLAN, 999, None)
    )  # too old
    store.close()

    page = client.get("/pipelines/demo").text
    charts = figures(page)

    assert list(charts) == ["lag", "oldest-unread", "duration", "written", "quarantined"]
    assert page.index('id="trends"') < page.index("<h2>Tables</h2>")  # above the tables
    # Kafka is down: the lag charts end at their last sample, named by its time; the table has no lag.
    at = (now - timedelta(hours=1)).isoformat()[:19].replace("T", " ") + " UTC"
    assert latest(charts["lag"]) == (at, "12") and latest(charts["oldest-unread"]) == (at, "40 s")
    assert "999" not in ET.tostring(charts["lag"], encoding="unicode")
    assert '<td class="num" id="total-lag">\u2014</td><td class="num" id="total-unread">unknown</td>' in page
    # The batch charts end at the newest batch with the figure: the same text as its row.
    rows = {
        int(i): row for i, row in re.findall(r'<tr id="batch-(\d+)"[^>]*>(.*?)</tr>', page, re.S)
    }  # fmt: skip
    assert latest(charts["written"]) == (f"batch {site['b1']}", "9")  # b2 failed: nothing written
    assert '<td class="num">9</td><td class="num">1</td>' in rows[site["b1"]]  # written, quarantined
    assert latest(charts["quarantined"]) == (f"batch {site['b1']}", "1")
    when, took = latest(charts["duration"])
    assert when == f"batch {site['b2']}" and f'took <span class="duration">{took}</span>' in rows[site["b2"]]
    # The JSON has the same history under "trends".
    body = client.get("/api/pipelines/demo").json()["trends"]
    assert [(p["lag_records"], p["oldest_unread_age_s"]) for p in body["lag"]] == [(30, None), (12, 40.0)]
    assert [b["batch_id"] for b in body["batches"]] == [site["b1"], site["b2"]]

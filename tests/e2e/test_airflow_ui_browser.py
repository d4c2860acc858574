"""The three things users do in the Airflow UI, done in headless Chromium as a person does them:
log in, trigger an ingest from its DAG page, review the batch on Browse -> Ingestion (its row and
the page's charts) and its data-quality report, backfill a range from the trigger form, and see an
invalid range refused.

The invalid range is one person's session with the rest: triggered from the backfill form right
after the ingest, its run goes while the person reviews the batch, and its refusal (the reason in
the task's log, no batch in the control DB nor on the page) is checked before the valid backfill.
(It was a test of its own, with its own browser session, login and wait for its run.)

Against the session's one `airflow standalone` (tests/e2e/conftest.py), on its pipeline ``ui``.
Each step leaves a screenshot in $EOS_STATE_DIR/browser/<test>/NN-<step>.png. Every wait is
bounded: Playwright's timeouts, and the REST API's wait for a run's end (RUN_TIMEOUT_S).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import pytest

from eos_ingest.control.store import Batch, ControlStore
from tests.e2e.conftest import RUN_TIMEOUT_S, Stack

if TYPE_CHECKING:
    from playwright.sync_api import Browser, FrameLocator, Page

    from tests.fixtures.browser import Screenshots

pytestmark = pytest.mark.e2e

INGEST, BACKFILL = "eos_ingest__ui", "eos_backfill__ui"
UI_WAIT_MS = 120_000  # one page of the UI on a busy 2-core machine


def log_in(page: Page, stack: Stack, shot: Screenshots) -> None:
    """Airflow 3's simple auth manager login page, as a person fills it in."""
    base = stack.api.base_url
    page.goto(base + "/")
    page.wait_for_url(re.compile(r"/auth/login"), timeout=UI_WAIT_MS)
    page.get_by_label("Username").fill(stack.api.username)
    page.get_by_label("Password").fill(stack.api.password)
    shot(page, "login")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/", timeout=UI_WAIT_MS)


def run_ids(stack: Stack, dag_id: str) -> set[str]:
    return {r["dag_run_id"] for r in stack.api.get(f"/dags/{dag_id}/dagRuns", limit=100)["dag_runs"]}


def trigger_from_dag_page(page: Page, stack: Stack, dag_id: str, shot: Screenshots, fill=None) -> str:
    """Open the DAG's page, press Trigger, fill the form (`fill(dialog)`), submit; the new run's id."""
    from playwright.sync_api import expect

    before = run_ids(stack, dag_id)
    page.goto(f"{stack.api.base_url}/dags/{dag_id}")
    page.get_by_test_id("trigger-dag-button").click(timeout=UI_WAIT_MS)
    dialog = page.get_by_role("dialog")
    submit = dialog.get_by_test_id("trigger-dag-submit")
    submit.wait_for(timeout=UI_WAIT_MS)
    if fill is not None:
        fill(page, dialog)
    expect(submit).to_be_enabled(timeout=UI_WAIT_MS)
    shot(page, f"trigger-{dag_id}")
    submit.click()
    expect(dialog).to_be_hidden(timeout=UI_WAIT_MS)
    new = run_ids(stack, dag_id) - before
    assert len(new) == 1, f"one new run of {dag_id} expected after the click, found {new}"
    return new.pop()


def see_run_end(page: Page, stack: Stack, dag_id: str, run_id: str, state: str, shot: Screenshots) -> None:
    """Wait (bounded) for the run to end, then see its state on the run's page."""
    from playwright.sync_api import expect

    # Away from the UI while the run lasts: the open DAG page re-renders on every poll, and its
    # renderer was Chromium's largest share of CPU, taken from the run's own Spark job.
    page.goto("about:blank")
    ended = stack.api.wait_for_run(dag_id, run_id, RUN_TIMEOUT_S)
    page.goto(f"{stack.api.base_url}/dags/{dag_id}/runs/{run_id}")
    # The run's heading is its id; the state badge stands beside it.
    header = page.get_by_role("heading", name=re.compile(re.escape(run_id))).locator("xpath=..")
    expect(header).to_contain_text(state, ignore_case=True, timeout=UI_WAIT_MS)
    shot(page, f"run-{dag_id}-{ended}")
    assert ended == state, stack.api.task_states(dag_id, run_id)


def open_ingestion(page: Page, stack: Stack, shot: Screenshots, step: str) -> FrameLocator:
    """Browse -> Ingestion -> the ui pipeline; the plugin's page, inside the UI's frame.

    From the UI's home page: Browse -> Ingestion while the frame shows another page (a Data Docs
    report) keeps that page, as the route does not change."""
    from playwright.sync_api import expect

    page.goto(stack.api.base_url + "/")
    page.get_by_role("button", name="Browse").click(timeout=UI_WAIT_MS)
    page.get_by_role("menuitem", name="Ingestion").click()
    page.wait_for_url(re.compile(r"/plugin/eos-ingest"), timeout=UI_WAIT_MS)
    frame = page.frame_locator("iframe")
    frame.get_by_role("link", name="ui", exact=True).click(timeout=UI_WAIT_MS)
    expect(frame.get_by_role("heading", name="Ingestion: ui")).to_be_visible(timeout=UI_WAIT_MS)
    shot(page, step)
    return frame


def see_batch_row(frame: FrameLocator, batch: Batch) -> None:
    """The batch's row on the pipeline page: its kind, status and counts."""
    from playwright.sync_api import expect

    row = frame.locator(f"#batch-{batch.batch_id}")
    cells = row.locator("td")
    expect(cells.nth(0)).to_have_text(str(batch.batch_id))
    expect(cells.nth(1)).to_have_text(batch.kind.value)
    expect(cells.nth(2)).to_have_text(batch.status.value)
    for column, value in (
        (5, batch.records_read),
        (6, batch.records_written),
        (7, batch.records_quarantined),
    ):
        expect(cells.nth(column)).to_have_text(f"{value:,}")


CHART_TITLES = {
    "lag": "Lag (offsets), last 24 h",
    "oldest-unread": "Oldest unread record, last 24 h",
    "duration": "Duration, plan to commit, last",
    "written": "Records written, last",
    "quarantined": "Records quarantined, last",
}


def see_charts(frame: FrameLocator, batch: Batch) -> None:
    """The pipeline page's charts: each there, titled for people and for screen readers, and each
    ending at the value the page's tables show: the lag charts at the partitions' total row (the
    page's own reading, "now"), the batch charts at `batch`'s row (the newest batch)."""
    from playwright.sync_api import expect

    expect(frame.locator("figure.chart")).to_have_count(len(CHART_TITLES))
    for name, title in CHART_TITLES.items():
        figure = frame.locator(f"figure[data-chart='{name}']")
        expect(figure.locator(".chart-title")).to_contain_text(title)
        svg = figure.locator("svg[role='img']")
        expect(svg).to_have_attribute("aria-labelledby", f"chart-{name}-title chart-{name}-desc")
        expect(svg.locator(f"title#chart-{name}-title")).to_contain_text(title)
        expect(svg.locator(f"desc#chart-{name}-desc")).not_to_be_empty()
    # The lag: the sample the run's plan recorded, then the page's reading, drawn as a line.
    lag = frame.locator("figure[data-chart='lag']")
    expect(lag.locator("polyline.line")).to_have_count(1)
    for name, total in (("lag", "#total-lag"), ("oldest-unread", "#total-unread")):
        figure = frame.locator(f"figure[data-chart='{name}']")
        expect(figure.locator(".chart-when")).to_have_text("now")
        expect(figure.locator(".chart-value")).to_have_text(frame.locator(total).inner_text())
    # A plan reads no record: the age's history comes from lag checks, and the chart says so.
    expect(frame.locator("figure[data-chart='oldest-unread'] .chart-note")).to_contain_text("check-lag")
    row = frame.locator(f"#batch-{batch.batch_id}")
    cells = row.locator("td")
    for name, shown in (
        ("duration", row.locator(".duration")),
        ("written", cells.nth(6)),
        ("quarantined", cells.nth(7)),
    ):
        figure = frame.locator(f"figure[data-chart='{name}']")
        expect(figure.locator(".chart-when")).to_have_text(f"batch {batch.batch_id}")
        expect(figure.locator(".chart-value")).to_have_text(shown.inner_text())
    expect(frame.locator("figure[data-chart='written'] rect.bar").last).to_be_visible()


def control_store(stack: Stack) -> ControlStore:
    store = ControlStore(stack.ui_config.control_db_url)
    store.ensure_schema()  # the tables exist once a task ran; this test may look before
    return store


def batches(stack: Stack) -> list[Batch]:
    return control_store(stack).list_batches("ui", limit=500)


def fill_backfill_form(partition: int, start: int, end: int, reason: str):
    """The backfill DAG's trigger form: the topic is preselected (the pipeline has one); the
    partitions field is a JSON editor; start and end offset; the reason."""

    def fill(page: Page, dialog) -> None:
        editor = dialog.locator(".monaco-editor").first
        editor.click()
        page.keyboard.press("ControlOrMeta+a")
        page.keyboard.press("Backspace")
        page.keyboard.insert_text(f"[{partition}]")
        dialog.locator("input[name=element_start_offset]").fill(str(start))
        dialog.locator("input[name=element_end_offset]").fill(str(end))
        dialog.locator("input[name=element_reason]").fill(reason)

    return fill


def paste_configuration(conf: dict):
    """The trigger form's Advanced Options -> Configuration JSON, which fills the param fields;
    then back to Run Parameters to see them filled (the two sections open one at a time)."""

    def fill(page: Page, dialog) -> None:
        from playwright.sync_api import expect

        dialog.get_by_role("button", name="Advanced Options").click()
        editor = dialog.locator(".monaco-editor").last  # the first one is the partitions field
        editor.click()
        page.keyboard.press("ControlOrMeta+a")
        page.keyboard.press("Backspace")
        page.keyboard.insert_text(json.dumps(conf))
        dialog.get_by_role("button", name="Run Parameters").click()
        expect(dialog.locator("input[name=element_reason]")).to_have_value(conf["reason"])
        expect(dialog.locator("input[name=element_end_offset]")).to_have_value(str(conf["end_offset"]))

    return fill


def test_a_person_ingests_reviews_the_quality_report_and_backfills_a_range(
    stack: Stack, page: Page, screenshots: Screenshots
) -> None:
    from playwright.sync_api import expect

    stack.api.wait_for_dag(INGEST)
    stack.api.wait_for_dag(BACKFILL)
    log_in(page, stack, screenshots)
    known = {b.batch_id for b in batches(stack)}

    # Trigger the ingest from its DAG page and wait for success.
    run_id = trigger_from_dag_page(page, stack, INGEST, screenshots)
    see_run_end(page, stack, INGEST, run_id, "success", screenshots)
    (batch,) = [b for b in batches(stack) if b.airflow_run_id == run_id and b.batch_id not in known]
    assert (batch.kind.value, batch.status.value, batch.dq_success) == ("scheduled", "committed", True)
    assert batch.records_read and batch.records_quarantined, batch  # the topic holds bad values too

    # An invalid range: partition 1 beyond its committed offset, from the backfill DAG's form.
    # Its run goes while the person reviews the batch; its refusal is checked below.
    fill = fill_backfill_form(1, 0, 10**9, "browser test: beyond the committed offset")
    refused_run = trigger_from_dag_page(page, stack, BACKFILL, screenshots, fill)

    # Browse -> Ingestion: the batch with its counts, and the charts ending at its figures.
    frame = open_ingestion(page, stack, screenshots, "ingestion-page")
    see_batch_row(frame, batch)
    see_charts(frame, batch)
    frame.locator("#trends").scroll_into_view_if_needed()
    screenshots(page, "ingestion-charts")

    # Its data-quality report: every expectation passed.
    frame.locator(f"#batch-{batch.batch_id}").get_by_role("link", name="report").click()
    expect(frame.get_by_text("Succeeded").first).to_be_visible(timeout=UI_WAIT_MS)
    # Great Expectations' statistics table: every evaluated expectation successful.
    report = frame.locator("body").inner_text()
    stats = {
        name: int(re.search(rf"(?m)^\s*{name}\s+(\d+)", report).group(1))  # type: ignore[union-attr]
        for name in ("Evaluated Expectations", "Successful Expectations", "Unsuccessful Expectations")
    }
    assert stats["Evaluated Expectations"] > 0 and stats["Unsuccessful Expectations"] == 0, stats
    assert stats["Successful Expectations"] == stats["Evaluated Expectations"], stats
    # Each expectation's row shows the passed icon; none shows the failed one.
    expect(frame.locator(".fa-times.text-danger")).to_have_count(0)
    assert frame.locator(".fa-check-circle.text-success").count() >= stats["Evaluated Expectations"]
    screenshots(page, "quality-report")

    # The invalid range was refused before any work: its run failed, with the refusal and its
    # reason in the failed task's log; no new batch, not in the control DB, not on the page.
    see_run_end(page, stack, BACKFILL, refused_run, "failed", screenshots)
    page.goto(f"{stack.api.base_url}/dags/{BACKFILL}/runs/{refused_run}/tasks/record_backfill")
    log = page.get_by_text(f"topic '{stack.ui_topic}' partition 1 range [0, {10**9})").first
    expect(log).to_be_visible(timeout=UI_WAIT_MS)
    reason = page.get_by_text(re.compile("goes beyond the committed offset|has not ingested this partition"))
    expect(reason.first).to_be_visible(timeout=UI_WAIT_MS)
    screenshots(page, "refusal-in-the-log")
    now = batches(stack)
    assert [b for b in now if b.airflow_run_id == refused_run] == [], now
    assert sorted(b.batch_id for b in now) == sorted(known | {batch.batch_id}), now

    # Backfill partition 0's committed range: the page's backfill hint, pasted into the form.
    # The page shows the control DB's batches, the ingest's the newest: none of the refused run.
    frame = open_ingestion(page, stack, screenshots, "ingestion-page-before-backfill")
    expect(frame.locator("tr[id^=batch-]")).to_have_count(min(len(now), 20))
    expect(frame.locator("tr[id^=batch-]").first).to_have_id(f"batch-{batch.batch_id}")
    hint = frame.locator("details.backfill").first
    hint.locator("summary").click()
    conf = json.loads(hint.locator("pre.conf").inner_text())
    committed = {tp.partition: o for tp, o in control_store(stack).committed_offsets("ui").items()}
    assert conf == {
        "topic": stack.ui_topic, "partitions": [0], "start_offset": 0, "end_offset": committed[0], "reason": "",
    }  # fmt: skip
    screenshots(page, "backfill-hint")
    # Its copy button puts that conf on the clipboard.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=stack.api.base_url)
    hint.get_by_role("button", name="copy").click()
    expect(hint.get_by_role("button", name="copied")).to_be_visible()
    assert json.loads(page.evaluate("navigator.clipboard.readText()")) == conf
    # Its link opens the backfill DAG's page in the UI itself, not a second UI inside the frame.
    hint.get_by_role("link", name=BACKFILL).click()
    page.wait_for_url(re.compile(rf"/dags/{BACKFILL}$"), timeout=UI_WAIT_MS)
    expect(page.get_by_test_id("trigger-dag-button")).to_be_visible(timeout=UI_WAIT_MS)
    expect(page.locator("iframe")).to_have_count(0)
    screenshots(page, "backfill-dag-page-from-the-link")
    # The person fills in the reason, as the hint asks, and pastes it into the form.
    fill = paste_configuration({**conf, "reason": "browser test: replace partition 0"})
    backfill_run = trigger_from_dag_page(page, stack, BACKFILL, screenshots, fill)
    see_run_end(page, stack, BACKFILL, backfill_run, "success", screenshots)
    (backfill,) = [b for b in batches(stack) if b.airflow_run_id == backfill_run]
    assert (backfill.kind.value, backfill.status.value) == ("backfill", "committed"), backfill
    frame = open_ingestion(page, stack, screenshots, "ingestion-page-with-backfill")
    see_batch_row(frame, backfill)
    see_charts(frame, backfill)  # the newest batch now
    expect(frame.locator(f"#batch-{backfill.batch_id}")).to_contain_text(
        f"{stack.ui_topic}[0] [0, {committed[0]:,})"
    )


def test_the_ingestion_page_follows_the_browsers_dark_mode(
    stack: Stack, browser: Browser, screenshots: Screenshots
) -> None:
    """prefers-color-scheme: dark (Playwright's color_scheme) turns the page dark, in Airflow's
    colours and font, with no script involved; light stays white."""
    from playwright.sync_api import expect

    looks, charts = {}, {}
    for scheme in ("dark", "light"):
        context = browser.new_context(
            viewport={"width": 1400, "height": 900}, locale="en-US", color_scheme=scheme
        )
        try:
            page = context.new_page()
            log_in(page, stack, screenshots)
            frame = open_ingestion(page, stack, screenshots, f"ingestion-page-{scheme}")
            expect(frame.locator("table").first).to_be_visible()
            looks[scheme] = frame.locator("body").evaluate(
                "b => [getComputedStyle(b).backgroundColor, getComputedStyle(b).color, getComputedStyle(b).fontFamily]"
            )
            # The charts take the theme's colours: a chart's plot area is the tables' header colour.
            charts[scheme] = frame.locator("body").evaluate(
                "b => [getComputedStyle(b.querySelector('figure.chart svg .frame')).fill,"
                " getComputedStyle(b.querySelector('th')).backgroundColor,"
                " getComputedStyle(b.querySelector('figure.chart svg text')).fill]"
            )
        finally:
            context.close()
    assert looks["dark"][0] == "oklch(0.11 0.025 251)", looks  # Airflow's gray.950
    assert looks["dark"][1] == "oklch(0.985 0.004 253)", looks  # gray.50
    assert looks["light"][0] == "rgb(255, 255, 255)", looks
    assert looks["dark"][2].startswith("Inter,"), looks
    for scheme in ("dark", "light"):
        assert charts[scheme][0] == charts[scheme][1], charts  # gray.900 in dark, gray.50 in light
    assert charts["dark"][0] != charts["light"][0] and charts["dark"][2] != charts["light"][2], charts


def test_backfill_times_are_picked_in_the_users_time_zone_and_sent_in_utc(
    stack: Stack, browser: Browser, screenshots: Screenshots
) -> None:
    """The backfill form's start_time (format date-time) in a browser at UTC+05:30: a UTC time in
    the conf shows as local time in the field, and a time picked there goes back to the conf in UTC.
    Nothing is triggered."""
    from playwright.sync_api import expect

    stack.api.wait_for_dag(BACKFILL)
    context = browser.new_context(
        viewport={"width": 1400, "height": 900}, locale="en-US", timezone_id="Asia/Kolkata"
    )
    try:
        page = context.new_page()
        log_in(page, stack, screenshots)
        page.goto(f"{stack.api.base_url}/dags/{BACKFILL}")
        page.get_by_test_id("trigger-dag-button").click(timeout=UI_WAIT_MS)
        dialog = page.get_by_role("dialog")
        dialog.get_by_test_id("trigger-dag-submit").wait_for(timeout=UI_WAIT_MS)
        conf = {"topic": stack.ui_topic, "partitions": [0], "reason": "time zones",
                "start_time": "2026-11-22T10:00:00Z", "end_time": "2026-11-22T11:00:00Z"}  # fmt: skip
        dialog.get_by_role("button", name="Advanced Options").click()
        editor = dialog.locator(".monaco-editor").last
        editor.click()
        page.keyboard.press("ControlOrMeta+a")
        page.keyboard.press("Backspace")
        page.keyboard.insert_text(json.dumps(conf))
        dialog.get_by_role("button", name="Run Parameters").click()
        shown = dialog.get_by_text("Nov 22, 2026 15:30")  # 10:00 UTC at UTC+05:30
        expect(shown).to_be_visible(timeout=UI_WAIT_MS)
        screenshots(page, "start-time-in-the-users-zone")
        shown.click()
        time_input = page.locator("input[value='15:30']")
        time_input.fill("16:00")
        dialog.get_by_role("heading").first.click()  # closes the picker, not the dialog
        expect(dialog.get_by_text("Nov 22, 2026 16:00")).to_be_visible(timeout=UI_WAIT_MS)
        dialog.get_by_role("button", name="Advanced Options").click()
        expect(dialog.locator(".monaco-editor").last).to_contain_text(
            "2026-11-22T10:30:00.000Z", timeout=UI_WAIT_MS
        )
        screenshots(page, "start-time-sent-in-utc")
    finally:
        context.close()

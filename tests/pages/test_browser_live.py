"""Live pages in a real browser, served as the web process serves them (uvicorn, the ASGI
application of `simrun_site.dispatch`): progress and plots move from the pages' event streams,
with no polling request; without JavaScript the pages reload themselves.

The runs are the factories' scan runs; the test does a unit's work in the store as the
harness does (a ledger commit and a progress line) or writes the run's row as the controller.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db.models import F
from playwright.sync_api import Browser, BrowserContext, Page, Request, expect
from pytest_django import Settings

from runs.backends import backend
from runs.models import Run
from runs.pages import run_page
from tests.api import scenes as api_scenes
from tests.api.live import serving
from tests.pages.browsing import log_in, mark_page, screenshot, was_not_reloaded
from tests.pages.scenes import one_more_unit_done, scan_run

NO_STATIC_ROOT = pytest.mark.filterwarnings("ignore:No directory at:UserWarning")
pytestmark = [pytest.mark.browser, NO_STATIC_ROOT, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def base_url(settings: Any) -> Iterator[str]:
    settings.SIMRUN_EVENTS_POLL_S = 0.1
    with serving() as url:
        yield url


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    """A browser context, closed before the server stops (its streams end with it)."""
    the_context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield the_context
    the_context.close()


def recorded(page: Page) -> list[Request]:
    requests: list[Request] = []
    page.on("request", lambda request: requests.append(request))
    return requests


def ten_seconds_later(page: Page) -> None:
    """Ten seconds of the page's timers at once: a poll every 2 s would ask five times."""
    page.clock.run_for(10_000)


def assert_no_polling(requests: list[Request], page_url: str) -> None:
    """After the page itself (its last document): only its static files and one or two event
    streams (a reconnection); nothing htmx asks for (a poll of a partial), no page again."""
    documents = [i for i, r in enumerate(requests) if r.resource_type == "document"]
    assert requests[documents[-1]].url == page_url
    base = page_url.split("/", 3)
    ours = f"{base[0]}//{base[2]}"
    later = [
        r
        for r in requests[documents[-1] + 1 :]
        if not r.url.startswith((f"{ours}/static/", f"{ours}/favicon"))
    ]
    assert [r.url for r in later if r.headers.get("hx-request")] == []
    assert [r.url for r in later if r.resource_type != "eventsource"] == []
    assert 1 <= len(later) <= 2, [r.url for r in later]


def test_the_run_page_moves_with_its_stream_and_never_polls(
    context: BrowserContext, base_url: str
) -> None:
    """S16: progress, the units plot and the memory per task move on the open page."""
    run = scan_run()
    page = context.new_page()
    log_in(page, base_url, "paul")
    requests = recorded(page)
    page.clock.install()  # the page's timers run when the test says (see `ten_seconds_later`)
    page.goto(f"{base_url}/runs/{run.id}/?task=scan")
    mark_page(page)
    units = page.locator("#run-live svg", has=page.locator("title", has_text="Units done"))
    memory = page.locator("#tasks-memory svg desc")
    expect(page.locator("#tasks-table")).to_contain_text("4 of 6 units")
    expect(units.locator("desc")).to_contain_text("4 of 6 units done")
    expect(memory).to_have_text(
        "scan: 0.75 / 1.50 GiB; scan · per unit: 0.05 / ? GiB; summary: ? / ? GiB"
    )
    ten_seconds_later(page)

    api_scenes.report(run, "scan-w1", attempt=1, peak_memory_gb=1.25, memory_limit_gb=1.5)
    one_more_unit_done(run, peak_gb=0.3)
    expect(page.locator("#tasks-table")).to_contain_text("5 of 6 units")
    expect(units.locator("desc")).to_contain_text("5 of 6 units done")
    expect(units.locator("line.projection")).to_have_count(1)
    expect(memory).to_have_text(
        "scan: 1.25 / 1.50 GiB; scan · per unit: 0.30 / ? GiB; summary: ? / ? GiB"
    )
    screenshot(page, "run-live-moved")

    Run.objects.filter(pk=run.pk).update(state="succeeded", version=F("version") + 1)
    expect(page.locator("#run-progress")).to_have_text("100%")
    expect(page.locator("#run-state")).to_contain_text("succeeded")
    assert was_not_reloaded(page), "the page was reloaded"
    assert_no_polling(requests, f"{base_url}/runs/{run.id}/?task=scan")


def test_the_run_list_moves_with_its_stream_and_never_polls(
    context: BrowserContext, base_url: str
) -> None:
    run = scan_run()
    page = context.new_page()
    requests = recorded(page)
    page.clock.install()
    log_in(page, base_url, "paul")  # the list is the page after logging in
    mark_page(page)
    cell = page.locator(f"#status-{run.id}")
    expect(cell).to_contain_text("33%")
    ten_seconds_later(page)
    one_more_unit_done(run)
    expect(cell).to_contain_text("42%")
    Run.objects.filter(pk=run.pk).update(state="failed", version=F("version") + 1)
    expect(cell).to_contain_text("failed")
    expect(cell.locator("progress")).to_have_count(0)
    assert was_not_reloaded(page), "the page was reloaded"
    assert_no_polling(requests, f"{base_url}/")


def test_a_run_submitted_while_the_list_is_open_is_announced_and_shown_on_click(
    context: BrowserContext, base_url: str
) -> None:
    """The list says "1 new run: show it" once a run is submitted, from its stream (no poll);
    the link brings the table with the new run in place, without reloading the page."""
    first = scan_run()
    page = context.new_page()
    requests = recorded(page)
    log_in(page, base_url, "paul")
    mark_page(page)
    expect(page.locator(f"tr[data-run='{first.id}']")).to_have_count(1)
    newer = scan_run()
    notice = page.locator("#newer-runs")
    expect(notice).to_have_text("1 new run: show it")
    assert_no_polling(requests, f"{base_url}/")
    notice.get_by_role("link").click()
    expect(page.locator(f"tr[data-run='{newer.id}']")).to_have_count(1)
    expect(page.locator("#newer-runs")).to_have_text("")
    assert was_not_reloaded(page), "the page was reloaded"


def test_the_servers_page_moves_with_its_stream_and_never_polls(
    context: BrowserContext, base_url: str, settings: Settings
) -> None:
    """A node reserved while the page is open shows up by itself, from the page's stream."""
    settings.SIMRUN_SERVERS_POLL_S = 0.2
    run = scan_run()
    page = context.new_page()
    log_in(page, base_url, "paul")
    requests = recorded(page)
    page.clock.install()
    page.goto(f"{base_url}/servers/")
    mark_page(page)
    expect(page.locator("#servers-live")).to_contain_text("not reserved")
    ten_seconds_later(page)
    backend().reserve(backend().nodes()[0].name, run.id)
    expect(page.locator("#servers-live")).to_contain_text(f"reserved by run {run.id}")
    assert was_not_reloaded(page), "the page was reloaded"
    assert_no_polling(requests, f"{base_url}/servers/")


def test_without_javascript_a_live_run_page_reloads_itself(
    browser: Browser, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No script: the page still reads (and its links act), and a meta refresh inside
    <noscript> brings it up to date."""
    monkeypatch.setattr(run_page, "NOSCRIPT_REFRESH_S", 1)
    run = scan_run()
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        log_in(page, base_url, "paul")
        page.goto(f"{base_url}/runs/{run.id}/?task=scan")
        expect(page.locator("#tasks-table")).to_contain_text("4 of 6 units")
        one_more_unit_done(run)
        expect(page.locator("#tasks-table")).to_contain_text("5 of 6 units")
        page.locator('a.dag-node[data-task="summary"]').click()
        expect(page.locator("#task-heading")).to_contain_text("Task summary")
    finally:
        context.close()

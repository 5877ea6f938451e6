"""The real stack in a browser: submit the example workflow, watch it reach 100 % in place.

A Celery worker and the watcher run as processes on the test database (the `services`
fixture of tests/e2e); the pages are served in this process as the web process serves them
(uvicorn, `simrun_site.dispatch`), so the page follows its event stream. Needs
CELERY_BROKER_URL=redis://… (a database of its own, so no other suite's worker takes the tasks).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect
from pytest_django import Settings

from runs.models import Run
from tests import factories
from tests.api.live import serving
from tests.e2e.conftest import Services, services, stopped_services  # noqa: F401 - fixtures by name
from tests.pages.browsing import log_in, mark_page, screenshot, was_not_reloaded

# The live server is made once per session, before the tests' own STATIC_ROOT exists.
NO_STATIC_ROOT = pytest.mark.filterwarnings("ignore:No directory at:UserWarning")
pytestmark = [
    pytest.mark.browser,
    NO_STATIC_ROOT,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

# The example study: a split scan of the repressilator's ODEs and a summary reading it.
EXAMPLE = """name: repressilator-scan
tasks:
  - id: scan
    type: ode_scan
    split: 2
    settings:
      parameters:
        alpha: {start: 100, stop: 300, num: 6}
        n: [1.5, 2.0, 2.5]
      t_end: 50
      n_points: 51
      chunk: 3
  - id: summary
    type: summary
    inputs:
      scan: scan
"""
WAIT_MS = 240_000


@pytest.mark.usefixtures("services")
def test_the_example_workflow_runs_to_100_percent_without_reloading(
    browser: Browser, settings: Settings, request: pytest.FixtureRequest
) -> None:
    """S7: the run's progress reaches 100 % on the open page, from its event stream alone."""
    stack: Services = request.getfixturevalue("services")
    settings.SIMRUN_LOCAL_CORES, settings.SIMRUN_LOCAL_MEMORY_GB = 2, 6  # as the worker's
    factories.person()
    with serving() as url:
        browser_context = browser.new_context(viewport={"width": 1280, "height": 900})
        try:
            watch_the_run(browser_context.new_page(), url, stack)
        finally:
            browser_context.close()


def watch_the_run(page: Page, url: str, stack: Services) -> None:
    log_in(page, url, "paul")
    page.get_by_role("link", name="Submit").click()
    editor = page.get_by_label("Workflow (YAML or JSON)")
    editor.fill(EXAMPLE)
    editor.press("End")
    expect(page.locator("#check")).to_contain_text("The workflow is valid.")
    page.get_by_label("Group").fill("example")
    page.get_by_role("button", name="Submit the run").click()
    page.wait_for_url(re.compile(r"/runs/[a-z0-9]+/$"))
    run_id = page.url.rstrip("/").rsplit("/", 1)[1]
    screenshot(page, "run-submitted")
    mark_page(page)
    expect(page.locator("#run-progress")).to_have_text("100%", timeout=WAIT_MS)
    expect(page.locator("#run-state")).to_contain_text("succeeded")
    assert was_not_reloaded(page), "the page was reloaded"
    run = Run.objects.get(pk=run_id)
    assert run.state == "succeeded", run.message + stack.log("worker")[-2000:]
    screenshot(page, "run-succeeded")

    page.locator('a.dag-node[data-task="scan"]').click()
    expect(page.locator("#workers-table")).to_contain_text("scan-w0")
    expect(page.locator("#outputs-table")).to_contain_text("tasks/scan/out/scan.nc")
    page.get_by_role("link", name="log of scan-w0").click()
    expect(page.locator("#log-heading")).to_have_text("Log of scan-w0")
    expect(page.locator("#log-tail")).to_contain_text("kept in the run store")
    screenshot(page, "run-succeeded-scan")

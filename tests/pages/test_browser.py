"""The pages in a real browser: log in, the DAG, a worker's log, compare, cancel, submit.

Runs made by the factories with their files written into the store; the run that really
progresses to 100 % is in test_browser_progress.py. Each test saves screenshots.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from runs.models import Run
from tests import factories
from tests.pages.browsing import log_in, mark_page, screenshot, was_not_reloaded
from tests.pages.scenes import LOG_LINE, scan_run

# The live server is made once per session, before the tests' own STATIC_ROOT exists.
NO_STATIC_ROOT = pytest.mark.filterwarnings("ignore:No directory at:UserWarning")
pytestmark = [pytest.mark.browser, NO_STATIC_ROOT, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def open_as(browser: Browser, live_server: Any) -> Iterator[Callable[[str], Page]]:
    """A page logged in as one of the lab's people (their identity made first)."""
    contexts = []

    def opened(name: str) -> Page:
        {"olivia": factories.owner, "paul": factories.person, "sam": factories.other_person}[name]()
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        log_in(page, live_server.url, name)
        return page

    yield opened
    for context in contexts:
        context.close()


def test_a_person_logs_in_and_sees_the_runs(open_as: Callable[[str], Page]) -> None:
    run = scan_run()
    factories.run(state="succeeded", group="g0")
    page = open_as("paul")
    expect(page.get_by_role("heading", level=1)).to_have_text("Runs")
    row = page.locator(f'tr[data-run="{run.id}"]')
    expect(row.get_by_text("running")).to_be_visible()
    expect(row.locator("progress")).to_have_attribute("value", "33")
    screenshot(page, "runs")


def test_the_dag_opens_a_task_by_its_node(open_as: Callable[[str], Page], live_server: Any) -> None:
    run = scan_run()
    page = open_as("paul")
    page.goto(f"{live_server.url}/runs/{run.id}/")
    expect(page.locator("svg.dag a.dag-node")).to_have_count(2)
    expect(page.locator('a.dag-node[data-task="scan"]')).to_have_attribute("data-state", "running")
    screenshot(page, "run")
    page.locator('a.dag-node[data-task="summary"]').click()
    page.wait_for_url(f"**/runs/{run.id}/?task=summary")
    expect(page.locator("#task-heading")).to_contain_text("Task summary")


def test_a_workers_log_opens_in_place(open_as: Callable[[str], Page], live_server: Any) -> None:
    run = scan_run()
    page = open_as("paul")
    page.goto(f"{live_server.url}/runs/{run.id}/?task=scan&pod=scan-w1")
    mark_page(page)
    page.get_by_role("link", name="log of scan-w0").click()
    expect(page.locator("#log-heading")).to_have_text("Log of scan-w0")
    expect(page.locator("#log-tail pre")).to_contain_text(LOG_LINE)
    assert was_not_reloaded(page)
    screenshot(page, "run-log")
    page.goto(f"{live_server.url}/runs/{run.id}/tasks/scan/logs/scan-w0/")
    expect(page.locator("pre.log")).to_contain_text(LOG_LINE)
    screenshot(page, "log")


def test_two_runs_are_compared_from_the_list(open_as: Callable[[str], Page]) -> None:
    first, second = scan_run(group="g1"), scan_run(group="g2")
    page = open_as("paul")
    page.get_by_label(f"Compare {first.id}").check()
    page.get_by_label(f"Compare {second.id}").check()
    page.get_by_role("button", name="Compare the selected runs").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Compare runs")
    group_row = page.locator("tr.differs", has=page.locator("code", has_text="group"))
    expect(group_row).to_contain_text("g1")
    expect(group_row).to_contain_text("g2")
    screenshot(page, "compare")


def test_a_run_is_cancelled_after_confirming(
    open_as: Callable[[str], Page], live_server: Any
) -> None:
    run = scan_run()
    page = open_as("paul")
    page.goto(f"{live_server.url}/runs/{run.id}/")
    messages: list[str] = []

    def accept(dialog: Any) -> None:
        messages.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    page.get_by_role("link", name="Cancel the run…").click()
    expect(page.locator("#run-state")).to_contain_text("cancelled")
    assert messages == [f"Cancel run {run.id}? Its pods are stopped."]
    assert Run.objects.get(pk=run.pk).state == "cancelled"
    expect(page.get_by_role("link", name="Cancel the run…")).to_have_count(0)
    screenshot(page, "run-cancelled")


def test_the_submit_page_checks_as_you_type(open_as: Callable[[str], Page]) -> None:
    page = open_as("paul")
    page.get_by_role("link", name="Submit").click()
    editor = page.get_by_label("Workflow (YAML or JSON)")
    editor.fill("name: naps\ntasks:\n  - id: nap\n    type: sleep\n    settings:\n      units: 0\n")
    editor.press("End")  # a key press: the check follows the typing
    expect(page.locator("#workflow-errors li")).to_have_text(
        "line 6: task 'nap': settings.units: Input should be greater than or equal to 1"
    )
    screenshot(page, "submit-errors")
    editor.fill("name: naps\ntasks:\n  - id: nap\n    type: sleep\n    settings:\n      units: 3\n")
    editor.press("End")
    expect(page.locator("#check")).to_contain_text("The workflow is valid.")
    page.get_by_role("link", name="spin").click()
    page.get_by_label("Task id").fill("burn")
    page.get_by_role("button", name="Add the task to the workflow").click()
    expect(editor).to_have_value(re.compile(r"- id: burn\n  type: spin"))
    screenshot(page, "submit-valid")


def test_the_owner_pages_and_the_servers(open_as: Callable[[str], Page], live_server: Any) -> None:
    scan_run()
    page = open_as("olivia")
    for url, heading, name in (
        ("/servers/", "Servers", "servers"),
        ("/usage/", "Usage of the run store", "usage"),
        ("/cleanup/", "Cleanup of ended runs", "cleanup"),
        ("/admin/runs/run/", "Select run to change", "admin-runs"),
    ):
        page.goto(f"{live_server.url}{url}")
        expect(page.locator("h1")).to_have_text(heading)
        screenshot(page, name)


def test_the_pages_read_and_act_without_javascript(browser: Browser, live_server: Any) -> None:
    """Without JavaScript: links choose the task and the log; cancel asks on its own page."""
    run = scan_run()
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    log_in(page, live_server.url, "paul")
    page.goto(f"{live_server.url}/runs/{run.id}/")
    page.locator('a.dag-node[data-task="summary"]').click()
    expect(page.locator("#task-heading")).to_contain_text("Task summary")
    page.goto(f"{live_server.url}/runs/{run.id}/?task=scan")
    page.get_by_role("link", name="log of scan-w0").click()
    expect(page.locator("#log-tail pre")).to_contain_text(LOG_LINE)
    page.get_by_role("link", name="Cancel the run…").click()
    expect(page.locator("h1")).to_have_text(f"Cancel run {run.id}?")
    screenshot(page, "cancel-confirm")
    page.get_by_role("button", name="Yes, cancel the run").click()
    expect(page.locator("#run-state")).to_contain_text("cancelled")
    context.close()


def test_static_files_answer_without_logging_in(browser: Browser, live_server: Any) -> None:
    """S1: the pages' static files need no login (nor token)."""
    context = browser.new_context()
    response = context.request.get(f"{live_server.url}/static/runs/htmx.min.js")
    assert response.status == 200 and b"htmx" in response.body()
    context.close()

"""The pages' streams against the web process as the service runs it: at most
SIMRUN_STREAMS_PER_IDENTITY open per identity, and ended once the session is logged out."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.test import Client

from tests import factories
from tests.pages.conftest import logged_in
from tests.pages.scenes import scan_run
from tests.pages.test_live_served import next_event
from tests.simrun_site.served import Web, web_process
from tests.waiting import DEADLINE_S

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 2


@pytest.fixture
def web(tmp_path: Path, store: Path) -> Iterator[Web]:
    env = {
        "SIMRUN_EVENTS_POLL_S": "0.1",
        "SIMRUN_EVENTS_MAX_S": str(DEADLINE_S * 4),
        "SIMRUN_STREAMS_PER_IDENTITY": str(LIMIT),
        "SIMRUN_TOKEN_RECHECK_S": "0.5",
    }
    with web_process(tmp_path / "web", env) as served:
        yield served


def browser_of(stack: ExitStack, web: Web, client: Client) -> httpx.Client:
    """An HTTP client with the session of a logged-in Django test client."""
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    return stack.enter_context(
        httpx.Client(
            base_url=web.url,
            cookies={settings.SESSION_COOKIE_NAME: cookie},
            timeout=DEADLINE_S,
        )
    )


def test_a_page_stream_ends_once_its_session_is_logged_out(web: Web) -> None:
    run = scan_run()
    paul = logged_in("paul")
    with ExitStack() as stack:
        browser = browser_of(stack, web, paul)
        response = stack.enter_context(browser.stream("GET", f"/runs/{run.id}/events/"))
        lines = response.iter_lines()
        assert next_event(lines)[0] == "live"
        paul.logout()  # the session is deleted
        assert next_event(lines)[0] == "end"
        assert list(lines) == []  # and the stream is over


def test_one_page_stream_more_than_an_identity_may_hold_is_429_in_json(web: Web) -> None:
    run = scan_run()
    with ExitStack() as stack:
        browser = browser_of(stack, web, logged_in("paul"))
        followed = []
        for _ in range(LIMIT):
            response = stack.enter_context(browser.stream("GET", f"/runs/{run.id}/events/"))
            followed.append(response.iter_lines())
            assert next_event(followed[-1])[0] == "live"
        refused = browser.get("/events/", params={"runs": f"{run.id}:running-66"})
        assert refused.status_code == 429
        assert refused.json()["code"] == "too_many_streams"
        assert int(refused.headers["Retry-After"]) > 0
        factories.other_person()
        someone_else = browser_of(stack, web, logged_in("sam"))
        theirs = stack.enter_context(someone_else.stream("GET", f"/runs/{run.id}/events/"))
        assert theirs.status_code == 200

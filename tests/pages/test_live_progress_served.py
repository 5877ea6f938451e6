"""A run page's progress as the web process serves it (uvicorn, ASGI): one stream stays open
and polls, and what it sends is decided by its change detection alone. A unit done changes no
record (the run's version stays), so the stream must see the ledger's count to send it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from runs.pages import live
from tests.api.live import serving
from tests.pages.conftest import logged_in
from tests.pages.scenes import one_more_unit_done, scan_run
from tests.pages.test_live_served import next_event
from tests.waiting import DEADLINE_S

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_served_run_stream_sends_a_unit_done_at_its_next_poll(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S16: S6: the run's record is unchanged, one more unit is done: the open stream sends
    the page's live part with the new count at its next poll, not when its periodic refresh
    comes round (made longer than the stream lives, so only the change can send it)."""
    monkeypatch.setattr(live, "REFRESH_S", 3600.0)
    settings.SIMRUN_EVENTS_POLL_S, settings.SIMRUN_EVENTS_MAX_S = 0.1, DEADLINE_S
    run = scan_run()
    cookie = logged_in("paul").cookies[settings.SESSION_COOKIE_NAME].value
    with serving() as url:
        client = httpx.Client(
            base_url=url, cookies={settings.SESSION_COOKIE_NAME: cookie}, timeout=DEADLINE_S
        )
        with client, client.stream("GET", f"/runs/{run.id}/events/") as response:
            lines = response.iter_lines()
            kind, html = next_event(lines)
            assert kind == "live" and "4 of 6 units" in html
            version = run.version

            one_more_unit_done(run)

            kind, html = next_event(lines)
            assert kind == "live" and "5 of 6 units" in html
    run.refresh_from_db()
    assert run.version == version  # nothing but the ledger changed

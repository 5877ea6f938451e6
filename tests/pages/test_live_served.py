"""The pages' streams served as the web process serves them (uvicorn): they wait in the event
loop, so open streams leave the request threads free."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from tests.api.live import serving
from tests.pages.conftest import logged_in
from tests.pages.scenes import one_more_unit_done, scan_run

pytestmark = pytest.mark.django_db(transaction=True)


def next_event(lines: Iterator[str]) -> tuple[str, str]:
    """(kind, data) of the next event of a stream read line by line."""
    kind, data = None, []
    for line in lines:
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: ") and kind is not None:
            data.append(line[6:])
        elif line == "" and kind is not None:
            return kind, "\n".join(data)
    raise AssertionError("the stream ended")


def test_open_page_streams_hold_no_request_thread(settings: Any) -> None:
    """S16: three run pages follow their streams on a web process of one request thread: a page
    still answers, and each stream then delivers the next change."""
    settings.SIMRUN_WEB_THREADS = 1
    settings.SIMRUN_EVENTS_POLL_S = 0.1
    run = scan_run()
    cookie = logged_in("paul").cookies[settings.SESSION_COOKIE_NAME].value
    with serving() as url, ExitStack() as streams:
        client = httpx.Client(
            base_url=url, cookies={settings.SESSION_COOKIE_NAME: cookie}, timeout=20
        )
        streams.callback(client.close)
        followed = []
        for _ in range(3):
            response = streams.enter_context(client.stream("GET", f"/runs/{run.id}/events/"))
            assert response.status_code == 200
            lines = response.iter_lines()
            assert next_event(lines)[0] == "live"  # nothing seen yet: what the page shows now
            followed.append(lines)
        page = client.get(f"/runs/{run.id}/")
        assert page.status_code == 200 and "4 of 6 units" in page.text
        one_more_unit_done(run)
        for lines in followed:
            kind, html = next_event(lines)
            assert kind == "live" and "5 of 6 units" in html


def test_a_page_stream_ends_after_its_maximum_time_and_resumes_from_its_last_id(
    settings: Any,
) -> None:
    """S16: a page's stream of a live run still ends (SIMRUN_EVENTS_MAX_S); reconnected with
    the id of the last event, it sends nothing the page has, then the next change."""
    settings.SIMRUN_EVENTS_POLL_S, settings.SIMRUN_EVENTS_MAX_S = 0.1, 0.5
    run = scan_run()
    cookie = logged_in("paul").cookies[settings.SESSION_COOKIE_NAME].value
    with serving() as url:
        # a stream that never ended would fail at the read timeout (its keep-alives come later)
        timeout = httpx.Timeout(20, read=10)
        client = httpx.Client(
            base_url=url, cookies={settings.SESSION_COOKIE_NAME: cookie}, timeout=timeout
        )
        with client:
            text = client.get(f"/runs/{run.id}/events/").text  # returns once the stream ended
            ids = [line[4:] for line in text.splitlines() if line.startswith("id: ")]
            assert len(ids) == 1 and "event: end" not in text
            again = client.get(f"/runs/{run.id}/events/", headers={"Last-Event-ID": ids[0]})
            assert "event: " not in again.text
            one_more_unit_done(run)
            with client.stream(
                "GET", f"/runs/{run.id}/events/", headers={"Last-Event-ID": ids[0]}
            ) as response:
                kind, html = next_event(response.iter_lines())
            assert kind == "live" and "5 of 6 units" in html

"""The pages' event streams, through Django's client (WSGI: one observation per request).

The streams served for real (uvicorn, a browser) are in test_browser_live.py.
"""

from __future__ import annotations

import re

import pytest
from django.db.models import F
from django.test import Client

from runs.models import Run
from runs.selectors.runs_list import cursor_at
from tests import factories
from tests.pages.scenes import one_more_unit_done, scan_run
from tests.pages.streams import connect_url, events

pytestmark = pytest.mark.django_db


def test_a_live_run_page_follows_its_stream_and_polls_nothing(paul: Client) -> None:
    run = scan_run()
    html = paul.get(f"/runs/{run.id}/").content.decode()
    assert 'hx-trigger="every' not in html
    assert connect_url(html).startswith(f"/runs/{run.id}/events/?seen=")
    assert 'sse-swap="live"' in html and 'sse-close="end"' in html
    assert '<noscript><meta http-equiv="refresh" content="10"></noscript>' in html


def test_an_ended_run_page_opens_no_stream_and_does_not_reload(paul: Client) -> None:
    html = paul.get(f"/runs/{scan_run(state='succeeded').id}/").content.decode()
    assert "sse-connect" not in html and 'http-equiv="refresh"' not in html


def test_the_run_stream_sends_the_live_part_only_when_it_changed(paul: Client) -> None:
    """S16: what the page shows is not sent again; a unit done is, with the new counts."""
    run = scan_run()
    url = connect_url(paul.get(f"/runs/{run.id}/?task=scan").content.decode())
    assert "task=scan" in url
    assert events(paul, url) == []
    one_more_unit_done(run)
    sent = events(paul, url)
    assert [kind for kind, _ in sent] == ["live"]
    assert sent[0][1].lstrip().startswith('<div id="run-live">') and "5 of 6 units" in sent[0][1]
    assert "Units done over time: scan" in sent[0][1]  # the task asked for stays chosen


def test_a_reconnect_with_the_last_event_id_gets_nothing_it_has(paul: Client) -> None:
    run = scan_run()
    url = f"/runs/{run.id}/events/?seen=0"
    response = paul.get(url)
    ident = re.search(r"^id: (\w+)$", b"".join(response.streaming_content).decode(), re.M)  # type: ignore[attr-defined]
    assert ident is not None
    assert events(paul, url, HTTP_LAST_EVENT_ID=ident.group(1)) == []


def test_the_run_stream_ends_with_the_final_state(paul: Client) -> None:
    run = scan_run()
    url = connect_url(paul.get(f"/runs/{run.id}/").content.decode())
    Run.objects.filter(pk=run.pk).update(state="succeeded", version=F("version") + 1)
    sent = events(paul, url)
    assert [kind for kind, _ in sent] == ["live", "end"]
    assert '<span id="run-progress">100%</span>' in sent[0][1]


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("?seen=<script>", "seen: '<script>' is not a digest this page sent"),
        ("?seen=" + "a" * 41, "is not a digest this page sent (hexadecimal, 1-40)"),
    ],
)
def test_a_run_stream_refuses_a_bad_digest(paul: Client, query: str, why: str) -> None:
    response = paul.get(f"/runs/{scan_run().id}/events/{query}")
    assert response.status_code == 400 and why in response.content.decode()


def test_the_streams_need_a_login() -> None:
    run = scan_run()
    for url in (f"/runs/{run.id}/events/", f"/events/?runs={run.id}:running-33"):
        response = Client().get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_list_streams_its_live_runs_and_polls_nothing(paul: Client) -> None:
    live, ended = scan_run(), factories.run(state="cancelled")
    html = paul.get("/").content.decode()
    assert 'hx-trigger="every' not in html
    assert connect_url(html) == f"/events/?runs={live.id}%3Arunning-33&after={position(ended)}"
    assert f'id="status-{live.id}" class="run-status" sse-swap="run-{live.id}"' in html
    assert f'sse-swap="run-{ended.id}"' not in html
    assert '<noscript><meta http-equiv="refresh" content="10"></noscript>' in html


def test_the_list_stream_sends_a_status_cell_when_it_changed(paul: Client) -> None:
    run = scan_run()
    url = f"/events/?runs={run.id}:running-33"
    assert events(paul, url) == []
    one_more_unit_done(run)
    sent = events(paul, url)
    assert [kind for kind, _ in sent] == [f"run-{run.id}"]
    assert sent[0][1].lstrip().startswith(f'<td id="status-{run.id}"') and "42%" in sent[0][1]
    Run.objects.filter(pk=run.pk).update(state="failed")
    sent = events(paul, url)
    assert [kind for kind, _ in sent] == [f"run-{run.id}", "end"]
    assert "failed" in sent[0][1] and "sse-swap" not in sent[0][1]


def position(run: Run) -> str:
    return cursor_at(created_at=run.created_at, run_id=run.id)


def test_a_first_page_says_when_newer_runs_match_its_filters(paul: Client) -> None:
    """The list's first page follows the runs submitted after it was shown: a notice says how
    many match its filters (their count, once per change), linking to the list with them."""
    shown = factories.run(state="succeeded", group="g1")
    html = paul.get("/?group=g1").content.decode()
    url = connect_url(html)
    assert url == f"/events/?after={position(shown)}&group=g1"
    assert 'id="newer-runs"' in html and "new run" not in html
    assert events(paul, url) == []
    factories.run(group="g2")  # another group: not on this list
    assert events(paul, url) == []
    factories.run(group="g1")
    factories.run(group="g1", state="failed")
    sent = events(paul, url)
    assert [kind for kind, _ in sent] == ["newer"]
    assert "2 new runs: show them" in sent[0][1] and 'hx-get="/?group=g1"' in sent[0][1]


def test_a_list_showing_no_runs_says_when_one_comes(paul: Client) -> None:
    html = paul.get("/").content.decode()
    url = connect_url(html)
    assert url == "/events/?after=0-0"
    factories.run()
    sent = events(paul, url)
    assert [kind for kind, _ in sent] == ["newer"] and "1 new run: show it" in sent[0][1]


def test_an_older_page_follows_no_newer_runs(paul: Client) -> None:
    factories.run(state="succeeded")
    html = paul.get("/?cursor=9999999999999999-zzz").content.decode()
    assert "sse-connect" not in html and 'id="newer-runs"' not in html


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("", "runs: name 1 to 50 runs"),
        ("?after=yesterday", "after: 'yesterday' is not a position in the list"),
        ("?after=0-0&state=sleeping", "state: unknown state 'sleeping'"),
        ("?runs=abc", "runs: 'abc' is not <run id>:<state>-<percent>"),
        ("?runs=" + ",".join(f"r{i}:running-1" for i in range(51)), "runs: name 1 to 50 runs"),
    ],
)
def test_the_list_stream_refuses_bad_runs(paul: Client, query: str, why: str) -> None:
    response = paul.get(f"/events/{query}")
    assert response.status_code == 400 and why in response.content.decode()


def test_a_following_log_tail_streams_until_it_ends(paul: Client) -> None:
    """scan-w1 has no log yet and its pod lives: the tail follows its stream, then ends."""
    run = scan_run()
    html = paul.get(f"/runs/{run.id}/tasks/scan/logs/scan-w1/").content.decode()
    assert 'hx-trigger="every' not in html
    url = connect_url(html)
    assert url.startswith(f"/runs/{run.id}/tasks/scan/logs/scan-w1/events/?seen=")
    assert events(paul, url) == []
    Run.objects.filter(pk=run.pk).update(state="cancelled")
    sent = events(paul, url)
    assert [kind for kind, _ in sent] == ["tail", "end"]
    assert "no log yet" in sent[0][1] and "waiting for the pod" not in sent[0][1]


def test_a_log_stream_of_no_pod_of_the_task_is_not_found(paul: Client) -> None:
    run = scan_run()
    assert paul.get(f"/runs/{run.id}/tasks/scan/logs/summary/events/").status_code == 404


def test_a_cancelling_run_is_followed_until_its_pods_are_stopped(paul: Client) -> None:
    """Cancelled but still settling: no `end` yet; once settled, the end."""
    run = scan_run()
    url = connect_url(paul.get(f"/runs/{run.id}/").content.decode())
    Run.objects.filter(pk=run.pk).update(
        state="cancelled", pending_cancel=True, version=F("version") + 1
    )
    sent = events(paul, url)
    assert [kind for kind, _ in sent] == ["live"] and "cancelling…" in sent[0][1]
    Run.objects.filter(pk=run.pk).update(pending_cancel=False, version=F("version") + 1)
    assert [kind for kind, _ in events(paul, url)] == ["live", "end"]


def test_the_list_follows_a_cancelling_run_until_it_settled(paul: Client) -> None:
    run = scan_run(state="cancelled", pending_cancel=True)
    html = paul.get("/").content.decode()
    assert connect_url(html).startswith(f"/events/?runs={run.id}%3Acancelled.cancelling-0&")
    url = f"/events/?runs={run.id}:cancelled.cancelling-0"
    assert events(paul, url) == []
    Run.objects.filter(pk=run.pk).update(pending_cancel=False)
    sent = events(paul, url)
    assert [kind for kind, _ in sent] == [f"run-{run.id}", "end"]
    assert "cancelling" not in sent[0][1] and "sse-swap" not in sent[0][1]

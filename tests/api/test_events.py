"""The event stream of a run, served for real by uvicorn: order, resume, end, maximum time."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from django.db.models import F
from pytest_django import Settings

from runs.models import Run
from tests.api import scenes
from tests.api.conftest import Lab
from tests.api.live import serving
from tests.api.sse import ServerEvent, StreamClient

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def base_url() -> Iterator[str]:
    with serving() as url:
        yield url


def change(run: Run, **fields: object) -> None:
    """A write of the controller: new values and a new version."""
    Run.objects.filter(pk=run.pk).update(version=F("version") + 1, **fields)


def test_the_stream_delivers_a_runs_changes_in_order(lab: Lab, base_url: str) -> None:
    """S16: state changes and progress arrive in order, each once, then `end`."""
    run = scenes.split_run(by=lab.person.identity, units=4, state="queued", version=1)
    with StreamClient(base_url, lab.agent.secret, timeout=20) as api:
        events = api.events(run.id)
        first = next(events)
        assert (first.kind, first.id, first.data["state"]) == ("state", "1-0", "queued")
        change(run, state="running")
        second = next(events)
        assert (second.kind, second.id, second.data["state"]) == ("state", "2-0", "running")
        scenes.work(run, "scan-w0", done=2)
        third = next(events)
        assert (third.kind, third.id, third.data["counts"]["scan"]["done"]) == (
            "progress",
            "2-2",
            2,
        )
        assert third.data["progress"] == 0.5
        change(run, state="succeeded")
        assert [(e.kind, e.id) for e in events] == [("state", "3-2"), ("end", None)]


def test_a_reconnect_with_the_last_event_id_loses_and_repeats_nothing(
    lab: Lab, base_url: str
) -> None:
    """S16: resumed with Last-Event-ID, the stream goes on after it: no repeat, the latest
    state at once, then what follows."""
    run = scenes.split_run(by=lab.person.identity, units=6, state="queued", version=1)
    with StreamClient(base_url, lab.person.secret, timeout=20) as api:
        stream = api.events(run.id)
        seen = next(stream)
        stream.close()  # the client goes away
        change(run, state="running")
        scenes.work(run, "scan-w1", done=3)
        resumed = api.events(run.id, last_event_id=seen.id)
        after = next(resumed)
        assert (after.kind, after.id, after.data["state"]) == ("state", "2-3", "running")
        assert after.data["counts"]["scan"]["done"] == 3
        change(run, state="failed", message="task 'scan' failed")
        rest = list(resumed)
        assert [(e.kind, e.id) for e in rest] == [("state", "3-3"), ("end", None)]
        assert rest[0].data["message"] == "task 'scan' failed"


def test_a_stream_ends_after_its_maximum_time_and_following_resumes_it(
    lab: Lab, base_url: str, settings: Settings
) -> None:
    """S16: streams end after a maximum time; the client reconnects and misses nothing."""
    settings.SIMRUN_EVENTS_MAX_S = 0.3
    run = scenes.split_run(by=lab.person.identity, units=2, state="running", version=5)
    with StreamClient(base_url, lab.person.secret, timeout=20) as api:
        assert [e.id for e in api.events(run.id)] == ["5-0"]  # ended by the service, not the run
        assert list(api.events(run.id, last_event_id="5-0")) == []  # nothing new, nothing again
        change(run, message="still running")
        followed: list[ServerEvent] = []
        for event in api.follow(run.id, last_event_id="5-0"):
            followed.append(event)
            if len(followed) == 1:
                change(run, state="succeeded")
        assert [(e.kind, e.id) for e in followed] == [
            ("state", "6-0"),
            ("state", "7-0"),
            ("end", None),
        ]


def test_the_stream_of_an_unknown_run_is_404_and_a_bad_id_is_400(lab: Lab, base_url: str) -> None:
    run = scenes.split_run(by=lab.person.identity)
    headers = {"Authorization": f"Bearer {lab.person.secret}", "Accept": "text/event-stream"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=20) as http:
        assert http.get("/api/runs/nosuchrun/events/").status_code == 404
        bad = http.get(f"/api/runs/{run.id}/events/", headers={"Last-Event-ID": "yesterday"})
        assert bad.status_code == 400
        assert "not an id of this stream" in bad.json()["detail"]
        assert httpx.get(f"{base_url}/api/runs/{run.id}/events/").status_code == 401


def test_an_open_stream_leaves_the_pooled_connection_to_other_requests(lab: Lab) -> None:
    """S16: a stream polls the database without keeping a connection between polls, so with a
    pool of one connection (as under ASGI with `SIMRUN_DB_POOL_SIZE=1`) a request made while
    the stream is open is answered."""
    run = scenes.split_run(by=lab.person.identity, units=4, state="running", version=1)
    with serving(pool_size=1) as url, StreamClient(url, lab.person.secret, timeout=20) as api:
        events = api.events(run.id)
        assert next(events).data["state"] == "running"
        assert api.show(run.id)["state"] == "running"
        change(run, state="succeeded")
        assert [e.kind for e in events] == ["state", "end"]

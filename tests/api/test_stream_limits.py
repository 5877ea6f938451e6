"""Open streams against the web process as the service runs it: they hold no thread each,
an identity holds at most SIMRUN_STREAMS_PER_IDENTITY of them, and a stream ends once the
token that opened it is revoked or deleted."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import psutil
import pytest

from runs.models import Token
from runs.services.identities import revoke_token
from tests.api import scenes
from tests.api.conftest import Lab
from tests.simrun_site.served import Web, web_process
from tests.waiting import DEADLINE_S, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 3


@pytest.fixture
def web(tmp_path: Path) -> Iterator[Web]:
    env = {
        "SIMRUN_EVENTS_POLL_S": "0.1",
        "SIMRUN_EVENTS_MAX_S": str(DEADLINE_S * 4),  # streams outlast every test
        "SIMRUN_STREAMS_PER_IDENTITY": str(LIMIT),
        "SIMRUN_TOKEN_RECHECK_S": "0.5",
    }
    with web_process(tmp_path / "web", env) as served:
        yield served


def open_stream(stack: ExitStack, web: Web, secret: str, path: str) -> httpx.Response:
    client = stack.enter_context(
        httpx.Client(
            base_url=web.url,
            headers={"Authorization": f"Bearer {secret}"},
            timeout=httpx.Timeout(DEADLINE_S),
        )
    )
    return stack.enter_context(client.stream("GET", path))


def first_event(response: httpx.Response) -> Iterator[str]:
    """The stream's lines, once its first event arrived (keep them: httpx closes the
    connection when they are thrown away)."""
    lines = response.iter_lines()
    for line in lines:
        if line.startswith("event: "):
            break
    return lines


def test_open_streams_hold_no_thread_each(lab: Lab, tmp_path: Path) -> None:
    """Twenty more open streams (events and logs followed) of several people: the web process
    runs hardly more threads than with one."""
    run = scenes.split_run(by=lab.person.identity, units=4, state="running", version=1)
    env = {"SIMRUN_EVENTS_POLL_S": "0.1", "SIMRUN_EVENTS_MAX_S": str(DEADLINE_S * 4)}
    members = [lab.person, lab.other, lab.agent, lab.owner]
    with web_process(tmp_path / "web", env) as web, ExitStack() as stack:
        first = open_stream(stack, web, lab.person.secret, f"/api/runs/{run.id}/events/")
        first_event(first)
        before = web.threads()
        for n in range(20):
            member = members[n % len(members)]
            path = f"/api/runs/{run.id}/events/"
            if n % 2:
                path = f"/api/runs/{run.id}/logs/?task=scan&follow=true"
            response = open_stream(stack, web, member.secret, path)
            assert response.status_code == 200
        during = web.threads()
        shown = httpx.get(
            f"{web.url}/api/runs/{run.id}/",
            headers={"Authorization": f"Bearer {lab.person.secret}"},
            timeout=DEADLINE_S,
        )
        assert shown.status_code == 200
    assert during - before <= 3, f"{before} threads with one stream, {during} with 21"


def test_one_stream_more_than_an_identity_may_hold_is_429_in_json(lab: Lab, web: Web) -> None:
    run = scenes.split_run(by=lab.person.identity, units=4, state="running", version=1)
    path = f"/api/runs/{run.id}/events/"
    with ExitStack() as stack:
        followed = [
            first_event(open_stream(stack, web, lab.person.secret, path)) for _ in range(LIMIT)
        ]
        refused = httpx.get(
            f"{web.url}{path}",
            headers={"Authorization": f"Bearer {lab.person.secret}"},
            timeout=DEADLINE_S,
        )
        assert refused.status_code == 429
        assert refused.json()["code"] == "too_many_streams"
        assert "SIMRUN_STREAMS_PER_IDENTITY" in refused.json()["detail"]
        assert int(refused.headers["Retry-After"]) > 0
        other = open_stream(stack, web, lab.other.secret, path)  # someone else's are their own
        assert other.status_code == 200
        assert len(followed) == LIMIT


def test_a_closed_stream_gives_its_place_back(lab: Lab, web: Web) -> None:
    run = scenes.split_run(by=lab.person.identity, units=4, state="running", version=1)
    path = f"/api/runs/{run.id}/events/"

    def opens() -> bool:
        with ExitStack() as again:
            return open_stream(again, web, lab.person.secret, path).status_code == 200

    with ExitStack() as stack:
        kept = [first_event(open_stream(stack, web, lab.person.secret, path)) for _ in range(2)]
        with ExitStack() as last:
            kept.append(first_event(open_stream(last, web, lab.person.secret, path)))
            assert not opens()
        # the last one closed
        wait_for(opens, what="the closed stream's place")


@pytest.mark.parametrize("how", ["revoked", "deleted"])
def test_a_stream_ends_once_its_token_is_revoked_or_deleted(lab: Lab, web: Web, how: str) -> None:
    """SIMRUN_TOKEN_RECHECK_S after its token is revoked (or deleted) elsewhere, an open
    stream of a live run ends: it sends nothing more from then on."""
    run = scenes.split_run(by=lab.person.identity, units=4, state="running", version=1)
    with ExitStack() as stack:
        events = open_stream(stack, web, lab.agent.secret, f"/api/runs/{run.id}/events/")
        logs = open_stream(
            stack, web, lab.agent.secret, f"/api/runs/{run.id}/logs/?task=scan&follow=true"
        )
        assert (events.status_code, logs.status_code) == (200, 200)
        events_lines = first_event(events)
        if how == "revoked":
            revoke_token(prefix_or_id=str(lab.agent.token_id))
        else:
            Token.objects.filter(pk=lab.agent.token_id).delete()
        # each returns once its stream ended (a stream still open fails at the read timeout)
        assert list(events_lines)[-2:] == [": the token was revoked", ""]
        assert list(logs.iter_lines()) == ["[simrun] the token was revoked"]


def test_open_streams_end_when_the_web_process_stops(lab: Lab, tmp_path: Path) -> None:
    """A web process told to stop (SIGTERM) with open streams ends them and exits, instead of
    waiting for them to reach SIMRUN_EVENTS_MAX_S."""
    run = scenes.split_run(by=lab.person.identity, units=4, state="running", version=1)
    env = {"SIMRUN_EVENTS_POLL_S": "0.1", "SIMRUN_EVENTS_MAX_S": str(DEADLINE_S * 10)}
    with ExitStack() as stack:
        web = stack.enter_context(web_process(tmp_path / "web", env))
        streams = [
            first_event(open_stream(stack, web, lab.person.secret, f"/api/runs/{run.id}/events/"))
            for _ in range(3)
        ]
        os.kill(web.pid, signal.SIGTERM)
        wait_for(lambda: gone(web.pid), what="the web process to exit")
        for lines in streams:
            list(lines)  # each ended


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True

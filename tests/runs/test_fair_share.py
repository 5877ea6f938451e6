"""Fair share of submissions between identities: a run waiting for a worker is sent again
once per back-off step, not at every controller pass; a worker takes the waiting submission
of the identity served longest ago, not the oldest message; an identity's runs in submission
and submissions per minute are bounded (429 with Retry-After, over HTTP)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
from django.test import override_settings
from django.utils import timezone
from pytest_django import Settings

import runs.tasks
from cluster.local.backend import LocalBackend
from runs.controller.backoff import Backoff
from runs.controller.seen import Seen
from runs.controller.tick import tick
from runs.models import Run
from runs.ports import RunLaunch
from runs.services.fair_share import Waiting, fairest, requeue_due
from runs.services.submission import create_run
from simrun_site.celery import app
from tests import factories
from tests.celery_worker import celery_worker
from tests.simrun_site.served import Web, web_process
from tests.waiting import DEADLINE_S, wait_for

LEASE_S = 30.0
HELLO = {
    "name": "hi",
    "tasks": [{"id": "hi", "type": "command", "settings": {"args": ["true"]}}],
}


def waiting_run(backend: LocalBackend, *, age: timedelta, by: str = "paul") -> Run:
    """A run recorded `submitting` `age` ago that no worker has taken."""
    run, _ = create_run(
        identity=factories.identity(by), workflow=HELLO, sources=[], nodes=backend.nodes()
    )
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - age)
    return run


@pytest.fixture
def backend(store: Path, settings: Settings) -> Iterator[LocalBackend]:
    settings.SIMRUN_SUBMIT_LEASE_S = LEASE_S
    made = LocalBackend(store, cores=2, memory_gb=2)
    yield made
    made.close()


@pytest.mark.django_db
def test_a_run_no_worker_took_is_sent_again_once_per_backoff_step_not_at_every_pass(
    backend: LocalBackend,
) -> None:
    """Five controller passes over a run left waiting past its lease time send one more
    message for it, not five (each pass sent one: 12,611 messages after a flood)."""
    waiting_run(backend, age=timedelta(seconds=LEASE_S * 2))
    app.control.purge()  # its first message, and anything earlier tests left

    for _ in range(5):
        tick(backend, seen=Seen(), backoff=Backoff())

    assert app.control.purge() == 1


class FirstHeld(LocalBackend):
    """A backend too small to start any pod (runs stay queued), whose first `submit` waits
    until the test has sent every submission."""

    def __init__(self, store: Path) -> None:
        super().__init__(store, cores=0.1, memory_gb=0.1)
        self.order: list[str] = []
        self.gate = threading.Event()

    def submit(self, launch: RunLaunch) -> str:
        self.order.append(launch.run_id)
        if len(self.order) == 1 and not self.gate.wait(DEADLINE_S):
            raise TimeoutError("the test never opened the gate")
        return super().submit(launch)


def submit(web: Web, secret: str) -> str:
    answer = httpx.post(
        f"{web.url}/api/runs/",
        json={"workflow": HELLO},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=DEADLINE_S,
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


@pytest.mark.django_db(transaction=True)
def test_the_next_submission_a_worker_takes_is_of_the_identity_served_longest_ago(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paul sends six runs, then Sam one, while a worker submits Paul's first: Sam's is the
    next one submitted, not the seventh (first in, first out)."""
    held = FirstHeld(store)
    monkeypatch.setattr(runs.tasks, "backend", lambda: held)
    paul = factories.token(factories.person()).secret
    sam = factories.token(factories.other_person()).secret
    with web_process(tmp_path / "web") as web, celery_worker():
        try:
            first = submit(web, paul)
            wait_for(lambda: held.order, what="the worker to take Paul's first run")
            pauls = [submit(web, paul) for _ in range(5)]
            sams = submit(web, sam)
        finally:
            held.gate.set()
        wait_for(lambda: len(held.order) == 7, what="every run submitted")
    held.close()
    assert held.order[:2] == [first, sams]
    assert sorted(held.order[2:]) == sorted(pauls)


def refused(web: Web, secret: str) -> httpx.Response:
    answer = httpx.post(
        f"{web.url}/api/runs/",
        json={"workflow": HELLO},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=DEADLINE_S,
    )
    assert answer.status_code == 429, answer.text
    return answer


@pytest.mark.django_db(transaction=True)
def test_a_submission_beyond_an_identitys_runs_in_submission_is_429_with_retry_after(
    store: Path, tmp_path: Path
) -> None:
    """SIMRUN_SUBMIT_MAX_PENDING runs of Paul's wait for a worker: his next is refused,
    naming the setting, and nothing is recorded; Sam still submits."""
    paul = factories.token(factories.person()).secret
    sam = factories.token(factories.other_person()).secret
    with web_process(tmp_path / "web", {"SIMRUN_SUBMIT_MAX_PENDING": "2"}) as web:
        submit(web, paul)
        submit(web, paul)
        answer = refused(web, paul)
        assert answer.json()["code"] == "too_many_submissions"
        assert "SIMRUN_SUBMIT_MAX_PENDING" in answer.json()["detail"]
        assert int(answer.headers["Retry-After"]) > 0
        assert Run.objects.filter(owner__name="paul").count() == 2
        submit(web, sam)


@pytest.mark.django_db(transaction=True)
def test_a_submission_beyond_an_identitys_submissions_per_minute_is_429_with_retry_after(
    store: Path, tmp_path: Path
) -> None:
    """SIMRUN_SUBMITS_PER_MINUTE submissions of Paul's within a minute: his next is refused
    until the first of them is a minute old (Retry-After says when)."""
    paul = factories.token(factories.person()).secret
    with web_process(tmp_path / "web", {"SIMRUN_SUBMITS_PER_MINUTE": "2"}) as web:
        submit(web, paul)
        submit(web, paul)
        answer = refused(web, paul)
        assert answer.json()["code"] == "too_many_submissions"
        assert "SIMRUN_SUBMITS_PER_MINUTE" in answer.json()["detail"]
        assert 0 < int(answer.headers["Retry-After"]) <= 60


@pytest.mark.django_db
def test_a_run_still_waiting_after_its_step_is_sent_again_then_waits_twice_as_long(
    backend: LocalBackend,
) -> None:
    run = waiting_run(backend, age=timedelta(seconds=LEASE_S * 2))
    app.control.purge()
    tick(backend, seen=Seen(), backoff=Backoff())
    Run.objects.filter(pk=run.pk).update(
        submit_queued_at=timezone.now() - timedelta(seconds=LEASE_S * 2 - 1)
    )
    tick(backend, seen=Seen(), backoff=Backoff())
    assert app.control.purge() == 1  # its second step is twice the lease: not passed yet
    Run.objects.filter(pk=run.pk).update(
        submit_queued_at=timezone.now() - timedelta(seconds=LEASE_S * 2 + 1)
    )
    tick(backend, seen=Seen(), backoff=Backoff())
    assert app.control.purge() == 1
    assert Run.objects.get(pk=run.pk).submit_requeues == 2


NOW = timezone.now()


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def test_the_identity_with_fewer_submissions_in_progress_goes_first() -> None:
    waiting = [Waiting("p1", 1, at(0)), Waiting("s1", 2, at(5))]
    picked = fairest(waiting, in_progress={1: 1}, turns={1: at(1), 2: at(0)})
    assert picked == waiting[1]


def test_then_the_identity_served_longest_ago_never_served_first() -> None:
    waiting = [Waiting("p1", 1, at(0)), Waiting("s1", 2, at(5)), Waiting("o1", 3, at(9))]
    assert fairest(waiting, in_progress={}, turns={1: at(3), 2: at(2), 3: None}) == waiting[2]
    assert fairest(waiting, in_progress={}, turns={1: at(3), 2: at(2)}) == waiting[2]
    assert fairest(waiting[:2], in_progress={}, turns={1: at(3), 2: at(2)}) == waiting[1]


def test_then_the_identity_waiting_longest_and_its_oldest_run() -> None:
    waiting = [Waiting("p2", 1, at(4)), Waiting("s1", 2, at(3)), Waiting("p1", 1, at(1))]
    assert fairest(waiting, in_progress={}, turns={}) == waiting[2]
    assert fairest([], in_progress={}, turns={}) is None


def test_a_run_is_due_again_once_its_step_passed_and_no_worker_holds_it() -> None:
    def due(after_s: float, requeues: int = 0, lease_s: float | None = None) -> bool:
        return requeue_due(
            now=at(after_s),
            created_at=NOW,
            queued_at=None,
            requeues=requeues,
            lease_until=None if lease_s is None else at(lease_s),
        )

    with override_settings(SIMRUN_SUBMIT_LEASE_S=30):
        assert (due(29), due(30)) == (False, True)
        assert (due(59, requeues=1), due(60, requeues=1)) == (False, True)
        assert due(10_000, requeues=30) and not due(599, requeues=30)  # at most 10 minutes
        assert not due(100, lease_s=101)  # a worker holds it

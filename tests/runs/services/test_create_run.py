"""`create_run`: the run and whether it was made now; it plans on the backend's nodes itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_django import Settings

from runs.backends import backend
from runs.models import Run
from runs.services.submission import create_run
from tests import factories

pytestmark = pytest.mark.django_db

HELLO = {
    "name": "hello",
    "tasks": [{"id": "hello", "type": "command", "settings": {"args": ["true"]}}],
}


@pytest.fixture
def local(store: Path, settings: Settings) -> Iterator[None]:
    settings.SIMRUN_BACKEND = "local"
    settings.SIMRUN_LOCAL_CORES = 2.0
    settings.SIMRUN_LOCAL_MEMORY_GB = 4.0
    backend.cache_clear()
    yield
    backend.cache_clear()


def test_a_run_is_planned_on_the_backends_nodes_and_made_now(local: None) -> None:
    run, created = create_run(identity=factories.person(), workflow=HELLO, sources=[])
    assert created
    assert [t.plan["nodes"] for t in run.tasks.all()] == [[backend().nodes()[0].name]]


def test_a_retry_with_its_key_returns_the_first_run_without_asking_the_backend(
    local: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S3: the retry of a submission whose answer was lost gets the run of the first, even
    while the backend cannot say what its nodes are."""
    person = factories.person()
    first, made = create_run(identity=person, workflow=HELLO, sources=[], idempotency_key="k")

    def unreachable() -> None:
        raise ConnectionError("the cluster does not answer")

    monkeypatch.setattr(backend(), "nodes", unreachable)
    again, made_again = create_run(identity=person, workflow=HELLO, sources=[], idempotency_key="k")
    assert (again.pk, made, made_again) == (first.pk, True, False)
    assert Run.objects.count() == 1

"""Environment builds shared between identities: one identity builds one environment at a time
(SIMRUN_BUILDS_PER_IDENTITY), so its flood of models to build cannot hold every worker. A
submission that would start a second build of its identity gives its run back and its worker
takes the next fairest run; the run given back is sent again as soon as the build it waits
for ends, and a dead worker's build holds no one once its lease runs out."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone
from pytest_django import Settings

from cluster.local import venvs
from cluster.local.backend import LocalBackend
from runs.models import Identity, Run, Snapshot
from runs.plans import Node
from runs.services.builds import builds_in_progress, end_build, start_build
from runs.services.fair_share import claim_next_submission
from runs.services.runs import cancel_run
from runs.services.submission import create_run, environment_of, submit_run
from runs.snapshots import snapshot_directory
from runs.store import store
from simrun_site.celery import app
from tests import factories
from tests.waiting import DEADLINE_S, wait_for

HELLO = {
    "name": "hi",
    "tasks": [{"id": "hi", "type": "command", "settings": {"args": ["true"]}}],
}


class HeldBuild(LocalBackend):
    """A backend too small to start any pod (runs stay queued) whose builds make an environment
    of the service's Python at once, but the build of `held` only once the test lets it end."""

    def __init__(self, store: Path) -> None:
        super().__init__(store, cores=0.1, memory_gb=0.1)
        self.held = ""
        self.started: list[str] = []
        self.let_end = threading.Event()

    def build_image(self, context: Mapping[str, bytes], ref: str) -> None:
        self.started.append(ref)
        if ref == self.held and not self.let_end.wait(DEADLINE_S):
            raise TimeoutError("the test never let the build end")
        place = self.store.environments / ref
        (place / "bin").mkdir(parents=True)
        (place / "bin" / "python").symlink_to(sys.executable)
        (place / venvs.MARKER).write_text(ref)


def model(by: Identity, name: str, tmp_path: Path) -> str:
    """A model snapshot whose environment must be built (a pyproject.toml of its own)."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "0.1"\n')
    info = snapshot_directory(store(), folder)
    Snapshot.objects.create(
        digest=info.digest, name=name, files=info.files, bytes=info.bytes, created_by=by
    )
    return info.digest


def recorded(backend: LocalBackend, by: Identity, sources: list[str]) -> Run:
    nodes = [Node(backend.node_name, 4, 16)]  # planned as on a node that could run it
    run, _ = create_run(identity=by, workflow=HELLO, sources=sources, nodes=nodes)
    return run


def state(run: Run) -> str:
    return Run.objects.get(pk=run.pk).state


@pytest.fixture
def backend(store: Path) -> Iterator[HeldBuild]:
    made = HeldBuild(store)
    yield made
    made.let_end.set()
    made.close()


def worker(run_id: str, backend: LocalBackend) -> threading.Thread:
    """A worker submitting, in a thread of its own (its own database connection)."""

    def work() -> None:
        try:
            submit_run(run_id=run_id, backend=backend)
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_while_an_identity_builds_its_next_build_waits_and_the_worker_takes_another_run(
    backend: HeldBuild, tmp_path: Path
) -> None:
    """Paul's first model builds in one worker; the other worker, though it is Paul's turn,
    does not start his second build but gives that run back and submits Sam's. Once Paul's
    first build ends, his second run is sent again at once (no back-off) and builds then."""
    paul, sam = factories.person(), factories.other_person()
    first = recorded(backend, paul, [model(paul, "one", tmp_path)])
    second = recorded(backend, paul, [model(paul, "two", tmp_path)])
    backend.held = environment_of(first)[0]
    building = worker(first.pk, backend)
    wait_for(lambda: backend.started == [backend.held], what="Paul's first build")
    held_by_another = recorded(backend, sam, [])
    sams = recorded(backend, sam, [])
    assert claim_next_submission() == held_by_another.pk  # Sam's turn is now after Paul's
    app.control.purge()  # the messages of the runs recorded: the test is each worker

    submit_run(run_id=sams.pk, backend=backend)  # a second worker, Sam's message

    assert state(sams) == "queued"
    assert backend.started == [backend.held]
    assert Run.objects.filter(pk=second.pk, state="submitting", submit_lease_until=None).exists()
    backend.let_end.set()
    building.join(DEADLINE_S)
    assert state(first) == "queued"
    assert app.control.purge() == 1  # Paul's second, sent as his build ended
    submit_run(run_id=second.pk, backend=backend)
    assert state(second) == "queued"
    assert backend.started == [backend.held, environment_of(second)[0]]


@pytest.mark.django_db
def test_a_build_whose_worker_died_holds_its_identity_only_until_its_lease_runs_out(
    backend: HeldBuild, tmp_path: Path, settings: Settings
) -> None:
    settings.SIMRUN_SUBMIT_LEASE_S = 30
    paul = factories.person()
    first = recorded(backend, paul, [model(paul, "one", tmp_path)])
    second = recorded(backend, paul, [model(paul, "two", tmp_path)])
    assert claim_next_submission() == first.pk
    assert start_build(run_id=first.pk, ref="one")
    assert claim_next_submission() == second.pk
    assert not start_build(run_id=second.pk, ref="two")  # given back: Paul builds
    assert claim_next_submission() is None  # his second waits for his build

    Run.objects.filter(pk=first.pk).update(
        submit_lease_until=timezone.now() - timedelta(seconds=1)
    )  # its worker died: no one renews its lease

    assert builds_in_progress(now=timezone.now()) == []
    assert claim_next_submission() == first.pk  # resumed by another worker, which looks again
    assert claim_next_submission() == second.pk
    assert start_build(run_id=second.pk, ref="two")


@pytest.mark.django_db
def test_an_environment_another_identity_is_building_is_not_built_twice(
    backend: HeldBuild, tmp_path: Path
) -> None:
    paul, sam = factories.person(), factories.other_person()
    pauls = recorded(backend, paul, [model(paul, "one", tmp_path)])
    sams = recorded(backend, sam, [])
    assert claim_next_submission() == pauls.pk
    assert start_build(run_id=pauls.pk, ref="one")
    assert claim_next_submission() == sams.pk
    assert not start_build(run_id=sams.pk, ref="one")  # waits for Paul's build of it
    assert claim_next_submission() is None

    end_build(run_id=pauls.pk, ref="one")

    assert claim_next_submission() == sams.pk


class CancelledMeanwhile(HeldBuild):
    """A backend asked whether a run's image exists just as its owner cancels the run."""

    def __init__(self, store: Path, cancel: Callable[[], object]) -> None:
        super().__init__(store)
        self.cancel = cancel

    def has_image(self, ref: str) -> bool:
        self.cancel()
        return super().has_image(ref)


@pytest.mark.django_db(transaction=True)
def test_a_run_cancelled_during_its_submission_builds_no_environment(
    store: Path, tmp_path: Path
) -> None:
    """Paul cancels his run while the worker submits it, before its environment is built:
    the worker builds nothing for it and leaves it cancelled, no build marked."""
    paul = factories.person()
    holder: list[Run] = []
    backend = CancelledMeanwhile(store, lambda: cancel_run(run_id=holder[0].pk, identity=paul))
    try:
        holder.append(recorded(backend, paul, [model(paul, "one", tmp_path)]))
        app.control.purge()

        submit_run(run_id=holder[0].pk, backend=backend)

        run = Run.objects.get(pk=holder[0].pk)
        assert backend.started == []
        assert (run.state, run.submit_building) == ("cancelled", "")
        assert builds_in_progress(now=timezone.now()) == []
    finally:
        backend.close()

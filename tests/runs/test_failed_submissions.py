"""A submission that raises fails its run and cancels the workflow it may have made (C21).

The backends are the real local backend with a fault at its port's `submit`: one refuses
before making anything, one makes the workflow and then raises, as a call whose reply is lost
does (the API server created the object, the client timed out).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.local.backend import LocalBackend
from runs.models import Run
from runs.ports import PodPhase, RunLaunch, WorkflowPhase
from runs.services.settle import settle
from runs.services.submission import create_run, submit_run
from tests import factories
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db


class ReplyLost(LocalBackend):
    """Makes the workflow, then raises as if the reply never came."""

    def submit(self, launch: RunLaunch) -> str:
        super().submit(launch)
        raise TimeoutError("the API server did not answer in time")


class Refused(LocalBackend):
    """Raises before making anything."""

    def submit(self, launch: RunLaunch) -> str:
        raise ConnectionRefusedError("the API server refused the connection")


def long_run(backend: LocalBackend) -> Run:
    """A run recorded `submitting` whose one command runs for a minute once started."""
    task = {"id": "long", "type": "command", "settings": {"args": ["sleep", "60"]}}
    run, _ = create_run(
        identity=factories.person(),
        workflow={"name": "long", "tasks": [task]},
        sources=[],
        nodes=backend.nodes(),
    )
    return run


def test_a_workflow_made_by_a_submission_that_raised_is_cancelled(store: Path) -> None:
    """C21: the submit made the workflow (its pod started) and raised: the run, still
    submitting, fails with the error and its workflow is cancelled: the running pod is
    stopped too, not left to finish for a run that failed."""
    backend = ReplyLost(store, cores=2, memory_gb=2)
    run = long_run(backend)

    submit_run(run_id=run.pk, backend=backend)

    failed = Run.objects.get(pk=run.pk)
    assert failed.state == "failed"
    assert failed.message == "submission failed: the API server did not answer in time"
    assert failed.pending_cancel
    wait_for(
        lambda: backend.status(run.workflow_name).pods["long"].phase is PodPhase.RUNNING,
        what="the pod of the workflow made",
    )
    settle(run.pk, backend)
    assert not Run.objects.get(pk=run.pk).pending_cancel
    wait_for(
        lambda: backend.status(run.workflow_name).pods["long"].phase != PodPhase.RUNNING,
        what="the running pod ended (a minute of sleep left)",
        timeout=20,
    )
    assert backend.status(run.workflow_name).phase is WorkflowPhase.STOPPED


def test_a_submission_refused_before_making_anything_fails_and_has_nothing_to_cancel(
    store: Path,
) -> None:
    """C21: C19: nothing was made: the run fails with the error; the cancel finds no
    workflow, which counts as cancelled."""
    backend = Refused(store, cores=2, memory_gb=2)
    run = long_run(backend)

    submit_run(run_id=run.pk, backend=backend)
    settle(run.pk, backend)

    failed = Run.objects.get(pk=run.pk)
    assert (failed.state, failed.pending_cancel) == ("failed", False)
    assert failed.message == "submission failed: the API server refused the connection"
    with pytest.raises(KeyError):
        backend.status(run.workflow_name)

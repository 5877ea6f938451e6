"""Faults injected, not imagined: killed workers and services, duplicate deliveries, races."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from cluster.local.backend import LocalBackend
from runs.backends import backend
from runs.controller.reconcile import reconcile_run
from runs.models import Run, Snapshot
from runs.services.runs import cancel_run
from runs.services.submission import create_run, submit_run
from runs.snapshots import snapshot_directory
from runs.store import store, task_paths
from simrun_harness.ledger_reads import counts
from simrun_harness.report import read_report
from tests import factories
from tests.e2e.conftest import Services, wait_for_end
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

NAPS = {"id": "nap", "type": "sleep", "settings": {"units": 12, "seconds": 1.0}, "split": 2}


def submit(workflow: dict[str, Any], **options: Any) -> Run:
    backend.cache_clear()
    run, _ = create_run(
        identity=factories.person(),
        workflow=workflow,
        sources=options.pop("sources", []),
        nodes=backend().nodes(),
        **options,
    )
    return run


def model_snapshot(tmp_path: Path, dependency: str) -> str:
    """A model with a pyproject.toml, so the run needs an environment built."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "pyproject.toml").write_text(
        f'[project]\nname = "tiny-model"\nversion = "0.1.0"\ndependencies = ["{dependency}"]\n'
    )
    info = snapshot_directory(store(), model)
    Snapshot.objects.create(digest=info.digest, name="model")
    return info.digest


def test_a_worker_killed_during_a_submission_is_resumed_by_another(
    services: Services, tmp_path: Path
) -> None:
    """C17: a run left submitting by a killed worker is resumed; one workflow; it succeeds."""
    digest = model_snapshot(tmp_path, "simrun-examples")
    task = {"id": "nap", "type": "sleep", "settings": {"units": 2, "seconds": 0.1}}
    run = submit({"name": "resumed", "tasks": [task]}, sources=[digest])
    wait_for(
        lambda: Run.objects.get(pk=run.pk).submit_lease_until is not None, what="the lease taken"
    )
    services.kill("worker")
    assert Run.objects.get(pk=run.pk).state == "submitting"
    services.start("worker2")
    run = wait_for_end(run.pk, timeout=600)
    assert run.state == "succeeded", run.message
    attempts = sorted(p.name for p in (store().run(run.pk).pods / "nap-w0").iterdir() if p.is_dir())
    assert attempts == ["0"]
    # The resumed submission leaves its times in order
    nap = run.tasks.get(task_id="nap")
    assert run.submitted_at and run.started_at and run.ended_at and nap.started_at and nap.ended_at
    assert run.created_at <= run.submitted_at <= run.started_at <= nap.started_at
    assert nap.started_at < nap.ended_at <= run.ended_at


def test_a_run_that_ended_while_its_services_were_down_keeps_its_pods_times(
    services: Services,
) -> None:
    """A task that ended while no controller looked gets its start and end
    from its pods' reports, and the run its end from its tasks, not the moment the restarted
    controller noticed."""
    task = {"id": "nap", "type": "sleep", "settings": {"units": 4, "seconds": 1.0}, "split": "none"}
    run = submit({"name": "unseen", "tasks": [task]})
    paths = task_paths(run.pk, "nap")
    wait_for(lambda: (c := counts(paths)) is not None and c.done >= 1, what="a unit", timeout=120)
    services.kill("worker")
    services.kill("watcher")
    wait_for(lambda: list(paths.reports.glob("nap-w0-*.json")), what="the pod's report", timeout=60)
    back = timezone.now()
    services.start("worker")
    services.start("watcher")
    run = wait_for_end(run.pk)
    assert run.state == "succeeded", run.message
    nap = run.tasks.get(task_id="nap")
    found = [read_report(p) for p in paths.reports.glob("*.json")]
    assert nap.started_at <= min(r.started_at for r in found)  # seen running, or reported
    assert nap.ended_at == max(r.ended_at for r in found) < back
    assert run.ended_at == nap.ended_at
    assert run.started_at is not None and run.started_at <= nap.started_at


def test_killing_every_service_mid_scan_loses_and_doubles_no_unit(services: Services) -> None:
    """C15: the controller keeps no state in memory; pods outlive the services that started them."""
    run = submit({"name": "survivor", "tasks": [NAPS]})
    paths = task_paths(run.pk, "nap")
    wait_for(
        lambda: (c := counts(paths)) is not None and c.done >= 2, what="units done", timeout=120
    )
    services.kill("worker")
    services.kill("watcher")
    services.start("worker")
    services.start("watcher")
    run = wait_for_end(run.pk)
    assert run.state == "succeeded", run.message
    merged = json.loads((paths.out / "units.json").read_text())
    assert merged == list(range(12))


def test_a_submission_delivered_twice_creates_one_workflow(
    transactional_db: Any, store: Path
) -> None:
    """Rule 9: the same submission task run twice at once makes one workflow."""
    backend.cache_clear()
    local = backend()
    assert isinstance(local, LocalBackend)
    run = submit(
        {
            "name": "twice",
            "tasks": [{"id": "hi", "type": "command", "settings": {"args": ["true"]}}],
        }
    )

    def deliver() -> None:
        try:
            submit_run(run_id=run.pk, backend=local)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    submit_run(run_id=run.pk, backend=local)
    assert Run.objects.get(pk=run.pk).state == "queued"
    wait_for(lambda: local.status(run.workflow_name).phase == "succeeded", what="the workflow")
    attempts = sorted(
        p.name for p in (store / "runs" / run.pk / "pods" / "hi").iterdir() if p.is_dir()
    )
    assert attempts == ["0"]


def test_a_reconcile_racing_a_cancel_leaves_the_run_cancelled(
    transactional_db: Any, store: Path
) -> None:
    """C22: a record is written only if it did not change since it was read."""
    backend.cache_clear()
    run = factories.run(state="running")
    stale = Run.objects.get(pk=run.pk)
    cancel_run(run_id=run.pk, identity=factories.person())
    assert reconcile_run(stale, backend()) is False
    assert Run.objects.get(pk=run.pk).state == "cancelled"


def test_a_reserved_run_releases_its_node_when_it_fails(services: Services) -> None:
    """C5: a failed run's reserved node is released."""
    node = backend().nodes()[0].name
    task = {"id": "bad", "type": "fail", "settings": {"units": 1}, "split": "none"}
    run = submit({"name": "reserved", "tasks": [task]}, reserve=node)
    run = wait_for_end(run.pk)
    assert run.state == "failed"
    wait_for(lambda: not Run.objects.get(pk=run.pk).pending_release, what="the release")
    backend.cache_clear()
    assert backend().nodes()[0].reserved_by is None


def test_a_failing_environment_build_fails_the_run_with_its_error(
    services: Services, tmp_path: Path
) -> None:
    """C21: a submission that raises (here its build) fails the run with the build's error."""
    digest = model_snapshot(tmp_path, "simrun-no-such-package-4242")
    task = {"id": "nap", "type": "sleep", "settings": {"units": 1, "seconds": 0}}
    run = wait_for_end(submit({"name": "unbuildable", "tasks": [task]}, sources=[digest]).pk)
    assert run.state == "failed"
    assert "simrun-no-such-package-4242" in run.message

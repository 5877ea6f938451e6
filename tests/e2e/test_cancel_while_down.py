"""`simrun cancel` while the services are down never says "cancelled" while units compute."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from runs.backends import backend
from runs.services.submission import create_run
from runs.store import task_paths
from tests import factories
from tests.e2e.commands import ROOT, SIMRUN, free_port, processes_of
from tests.e2e.conftest import Services
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

LONG = {"id": "naps", "type": "sleep", "settings": {"units": 400, "seconds": 0.5}}


def test_cancel_with_the_services_down_stops_the_pods_itself(
    services: Services, tmp_path: Path
) -> None:
    """A run computes; its worker and watcher are stopped (its pods go on, as they do when a
    service restarts); `simrun cancel` from a terminal (which starts the services when none
    answers) says the run is cancelled only once its pods have stopped, and exits 0. Before,
    it printed "cancelled" while the pods computed every unit left until the services were
    back."""
    backend.cache_clear()
    run, _ = create_run(
        identity=factories.person(),
        workflow={"name": "down", "tasks": [LONG]},
        sources=[],
        nodes=backend().nodes(),
    )
    done = task_paths(run.pk, "naps").ledger / "done"
    wait_for(lambda: done.is_dir() and any(done.iterdir()), timeout=120, what="a unit done")
    services.stop_all()
    store = Path(services.env["SIMRUN_STORE"])

    pods = [p for p in processes_of(store) if p.name() == "simrun-worker"]
    env = {k: v for k, v in services.env.items() if k != "SIMRUN_URL"}
    cancelled = subprocess.run(
        [str(SIMRUN), "cancel", run.pk],
        cwd=ROOT,
        # the serve it starts (no service answers): on a free port
        env={**env, "SIMRUN_AUTOSTART": "true", "SIMRUN_PORT": str(free_port())},
        capture_output=True,
        text=True,
        timeout=300,
    )
    running_after = [p for p in pods if p.is_running() and p.status() != "zombie"]
    units_at_end = len(list(done.iterdir()))

    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    assert pods and running_after == [], "its pods stopped before cancel said it was done"
    assert units_at_end < 400
    assert cancelled.stdout.splitlines()[-1] == f"run {run.pk} cancelled; its pods have stopped", (
        cancelled.stdout + cancelled.stderr
    )

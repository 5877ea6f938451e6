"""`python manage.py simrun watch` on the Argo backend: the watcher process of the service.

The watcher polls only every 30 s here, so a run that ends within the wait was driven by the
backend's watch waking it (B8). Killed with -9 mid-run and started again, the new process
carries the run to its end (C15).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from cluster.argo.backend import ArgoBackend
from runs.models import Run
from runs.services.submission import create_run, submit_run
from tests import factories
from tests.cluster.argo.lab import Lab
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.django_db(transaction=True)


class Watchers:
    """Watcher processes of one test."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        with (self.logs / f"watcher-{len(self.procs)}.log").open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "simrun", "watch"],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.kill(proc)

    def ready(self, index: int) -> bool:
        """Whether watcher `index` has subscribed to the backend."""
        path = self.logs / f"watcher-{index}.log"
        return path.exists() and "watching runs" in path.read_text(errors="replace")


@pytest.fixture
def watchers(
    lab: Lab, argo_settings: Callable[[], ArgoBackend], tmp_path: Path
) -> Iterator[Watchers]:
    db = django_settings.DATABASES["default"]
    host = f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
    config = lab.config
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER'] or 'postgres'}@{host}/{db['NAME']}",
        "SIMRUN_DATA_DIR": str(tmp_path / "data"),
        "SIMRUN_BACKEND": "argo",
        "SIMRUN_STORE": str(lab.store),
        "SIMRUN_POLL_S": "30",
        "SIMRUN_GRACE_S": "1",
        "SIMRUN_KUBECONFIG": config.kubeconfig,
        "SIMRUN_NAMESPACE": config.namespace,
        "SIMRUN_POD_STORE": config.pod_store,
        "SIMRUN_REGISTRY": config.registry,
        "SIMRUN_DEFAULT_IMAGE": config.default_image,
        "SIMRUN_WATCH_TIMEOUT_S": "5",
        "PYTHONUNBUFFERED": "1",
    }
    logs = tmp_path / "logs"
    logs.mkdir()
    found = Watchers(env, logs)
    yield found
    found.stop_all()


def state(run_id: str) -> Any:
    return Run.objects.get(pk=run_id)


def test_the_watcher_follows_a_run_on_wakes_and_a_restarted_one_finishes_it(
    lab: Lab, argo_settings: Callable[[], ArgoBackend], watchers: Watchers
) -> None:
    """B8: C15: the watch wakes the watcher's reconciliation; after kill -9 of the watcher a
    new one continues the run to its end, with its logs kept."""
    backend = argo_settings()
    first = watchers.start()
    wait_for(lambda: watchers.ready(0), timeout=60, what="the watcher ready")
    run, _ = create_run(
        identity=factories.person(),
        workflow={
            "name": "watched",
            "tasks": [
                {
                    "id": "scan",
                    "type": "sleep",
                    "settings": {"units": 27, "seconds": 1.0},
                    "split": 3,
                }
            ],
        },
        sources=[],
        nodes=backend.nodes(),
    )
    submit_run(run_id=run.pk, backend=backend)
    wait_for(lambda: state(run.pk).state == "running", timeout=25, what="the run running")

    watchers.kill(first)
    watchers.start()
    wait_for(lambda: watchers.ready(1), timeout=60, what="the new watcher ready")

    def settled() -> Run | None:
        found = state(run.pk)
        pending = found.pending_cancel or found.pending_logs or found.pending_release
        return found if found.ended and not pending else None

    run = wait_for(settled, timeout=25, what="the end of the run")
    assert run.state == "succeeded", run.message
    assert run.tasks.get(task_id="scan").logs_kept

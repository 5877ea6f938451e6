"""The embedded default for real: a Celery worker and the watcher as processes, on the test DB.

Tests submit through the domain (as the CLI and the API do), then wait on the run's row.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from django.conf import settings as django_settings
from pytest_django import Settings

from runs.cli.service_commands import service_command, stop_services
from runs.models import Run
from runs.states import RunState
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Services:
    """Worker and watcher processes of one test, restartable and killable."""

    env: dict[str, str]
    logs: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str) -> subprocess.Popen[bytes]:
        kind = name.rstrip("0123456789")
        command = service_command(kind, name=f"{name}-{os.getpid()}-{len(self.procs)}@%h")
        out = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def kill(self, name: str) -> None:
        """kill -9 of a service process and everything it started in its session."""
        proc = self.procs.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop_all(self) -> None:
        stop_services(self.procs)
        self.procs.clear()

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture
def services(stopped_services: Services) -> Services:
    """A store, a Celery worker and the watcher, sharing the test database with this process."""
    stopped_services.start("worker")
    stopped_services.start("watcher")
    return stopped_services


@pytest.fixture
def stopped_services(
    transactional_db: Any, tmp_path: Path, settings: Settings
) -> Iterator[Services]:
    """The store and the services' environment, with no service started yet."""
    broker = django_settings.CELERY_BROKER_URL
    assert broker.startswith("redis://"), "end-to-end tests need CELERY_BROKER_URL=redis://…"
    store = tmp_path / "store"
    store.mkdir(exist_ok=True)  # made already where the test serves the API (`simrun_api`)
    settings.SIMRUN_STORE = store
    settings.SIMRUN_SUBMIT_LEASE_S = 3.0
    db = django_settings.DATABASES["default"]
    host = f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
    url = f"postgres://{db['USER'] or 'postgres'}@{host}/{db['NAME']}"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "SIMRUN_STORE": str(store),
        "SIMRUN_DATA_DIR": str(tmp_path / "data"),
        "SIMRUN_POLL_S": "0.3",
        "SIMRUN_SUBMIT_LEASE_S": "3",
        "SIMRUN_GRACE_S": "5",
        "SIMRUN_LOCAL_CORES": "2",
        "SIMRUN_LOCAL_MEMORY_GB": "6",
        "PYTHONUNBUFFERED": "1",
    }
    logs = tmp_path / "logs"
    logs.mkdir()
    the_services = Services(env=env, logs=logs)
    yield the_services
    the_services.stop_all()
    _kill_pods(store)


def _kill_pods(store: Path) -> None:
    """Leave no pod of a test behind (they are detached on purpose)."""
    for proc in psutil.process_iter(["pid", "environ", "cmdline"]):
        environ = proc.info.get("environ") or {}
        text = " ".join(proc.info.get("cmdline") or []) + " ".join(environ.values())
        if str(store) in text:
            with contextlib.suppress(psutil.Error):
                proc.kill()


def wait_for_end(run_id: str, timeout: float = 240) -> Run:
    """The run once it has ended (and settled), or a failure naming its last state."""

    def ended() -> Run | None:
        run = Run.objects.get(pk=run_id)
        return run if run.state in RunState.ended() else None

    return wait_for(ended, timeout=timeout, what=f"run {run_id} to end")

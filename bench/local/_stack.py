"""The stack the local-backend benchmarks run on: a throwaway database, a store, the services.

`stack()` creates the Postgres database `bench_local_<pid>`, migrates it, points Django and
Celery (Redis db 14, a queue of its own) at it and at a temporary run store, and optionally
starts a Celery worker and the watcher as the end-to-end tests do (tests/e2e/conftest.py).
On the way out it stops the services, kills every pod left of the store, drops the database
and removes the temporary files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runs.cli.service_commands import service_command, stop_services  # noqa: E402 - after sys.path
from tests import waiting  # noqa: E402

PG_SERVER = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
BROKER = os.environ.get("BENCH_BROKER", "redis://127.0.0.1:6379/14")

T = TypeVar("T")


@dataclass
class Stack:
    """One benchmark's database, store and service processes."""

    database: str
    tmp: Path
    env: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def store(self) -> Path:
        return Path(self.env["SIMRUN_STORE"])

    @property
    def logs(self) -> Path:
        return self.tmp / "logs"

    def start(self, kind: str) -> subprocess.Popen[bytes]:
        """Start a Celery worker (`worker`) or the watcher (`watcher`), in a session of its own."""
        command = service_command(kind, name=f"bench-{os.getpid()}@%h")
        self.logs.mkdir(exist_ok=True)
        with (self.logs / f"{kind}.log").open("ab") as out:
            proc = subprocess.Popen(
                command,
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs[kind] = proc
        return proc

    def pids(self) -> dict[str, int]:
        """The main process of each service started (worker, watcher)."""
        return {kind: proc.pid for kind, proc in self.procs.items()}

    def stop_all(self) -> None:
        stop_services(self.procs)
        self.procs.clear()


def _admin_sql(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def _kill_pods(store: Path) -> None:
    """Leave no pod behind: they run detached, in sessions of their own, on purpose."""
    import psutil

    for proc in psutil.process_iter(["pid", "cmdline", "environ"]):
        if proc.pid == os.getpid():
            continue
        environ = proc.info.get("environ") or {}
        text = " ".join(proc.info.get("cmdline") or []) + " ".join(environ.values())
        if str(store) in text:
            with contextlib.suppress(psutil.Error):
                proc.kill()


def _drop_queue(queue: str) -> None:
    import redis

    client = redis.Redis.from_url(BROKER)
    keys = [queue, *client.keys(f"*{queue}*")]  # the queue and kombu's bindings of it
    client.delete(*keys)


@contextlib.contextmanager
def stack(*, services: bool, extra_env: dict[str, str] | None = None) -> Iterator[Stack]:
    """A migrated throwaway database and a store; with `services`, the worker and watcher."""
    pid = os.getpid()
    database = f"bench_local_{pid}"
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-local-{pid}-"))
    queue = f"bench-local-{pid}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "simrun_site.settings",
        "DATABASE_URL": f"{PG_SERVER}/{database}",
        "SIMRUN_DATA_DIR": str(tmp / "data"),
        "SIMRUN_STORE": str(tmp / "store"),
        "CELERY_BROKER_URL": BROKER,
        "SIMRUN_CELERY_QUEUE": queue,
        "SIMRUN_LOCAL_CORES": "2",
        "SIMRUN_LOCAL_MEMORY_GB": "6",
        "SIMRUN_LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        **(extra_env or {}),
    }
    os.environ.update(env)
    (tmp / "store").mkdir()
    _admin_sql(f'CREATE DATABASE "{database}"')
    the_stack = Stack(database=database, tmp=tmp, env=env)
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        if services:
            the_stack.start("worker")
            the_stack.start("watcher")
        yield the_stack
    finally:
        the_stack.stop_all()
        _kill_pods(the_stack.store)
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        _admin_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        with contextlib.suppress(Exception):
            _drop_queue(queue)
        shutil.rmtree(tmp, ignore_errors=True)


def wait_for(condition: Callable[[], T | None], *, timeout: float, what: str, every: float) -> T:
    """Poll `condition` until it returns something truthy; fail at the deadline."""
    return waiting.wait_for(condition, timeout=timeout, what=what, interval=every)  # type: ignore[return-value]


def quantile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of the values, interpolated (the median for q = 0.5)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[round(q * 100) - 1]

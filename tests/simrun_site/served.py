"""The web process as the service starts it (`service_command("web")`: uvicorn running
`simrun_site.asgi`) on the test database, for the tests of what a client can do to it."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from django.conf import settings as django_settings

from runs.cli.service_commands import ROOT, service_command
from tests.waiting import wait_for


@dataclass
class Web:
    url: str
    host: str
    port: int
    pid: int
    log: Path
    tmp: Path  # the process's TMPDIR: where Django would spool a body it reads

    def log_text(self) -> str:
        return self.log.read_text()

    def threads(self) -> int:
        """How many threads the web process runs now."""
        return len(os.listdir(f"/proc/{self.pid}/task"))

    def descriptors(self) -> int:
        """How many file descriptors the web process holds now."""
        return len(os.listdir(f"/proc/{self.pid}/fd"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def database_url() -> str:
    """The test database (committed rows only: `django_db(transaction=True)`)."""
    db = django_settings.DATABASES["default"]
    host = f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
    return f"postgres://{db['USER'] or 'postgres'}@{host}/{db['NAME']}"


@contextmanager
def web_process(folder: Path, env: dict[str, str] | None = None) -> Iterator[Web]:
    """A web process on the test database until the block ends, with the variables `env`."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "tmp"
    tmp.mkdir(exist_ok=True)
    port = free_port()
    full_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SIMRUN_")},
        # the test's broker and queue (dev.sh's), so its Celery worker gets what this one sends
        "SIMRUN_CELERY_QUEUE": django_settings.CELERY_TASK_DEFAULT_QUEUE,
        "DATABASE_URL": database_url(),
        "SIMRUN_DATA_DIR": str(folder / "data"),
        "SIMRUN_STORE": str(django_settings.SIMRUN_STORE),
        "SIMRUN_REDIS_URL": "",
        "SIMRUN_SECRET_KEY": django_settings.SECRET_KEY,  # sessions made by the test
        "SIMRUN_LOG_LEVEL": "WARNING",
        "TMPDIR": str(tmp),
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    log = folder / "web.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            service_command("web", port=port),
            cwd=ROOT,
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _up(url) or proc.poll() is not None, timeout=60, what="the web process")
        assert proc.poll() is None, log.read_text()
        yield Web(url, "127.0.0.1", port, proc.pid, log, tmp)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

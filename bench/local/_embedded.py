"""The embedded default for the local-backend benchmarks: `simrun serve` in a fresh data
directory (SQLite, the file broker, the local backend), and this process set up as one more
client of the same installation (its database file, its store).

`embedded()` starts serve on a free port, waits until it serves, points this process at the
same data directory and sets Django up; on the way out it stops serve (`simrun stop`), kills
any pod left of the store and removes the data directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.local._chaos import service_pids  # noqa: E402
from bench.local._soak_parts import Serve  # noqa: E402
from bench.local._stack import _kill_pods  # noqa: E402


@dataclass
class Embedded:
    """One `simrun serve` of the embedded default and its data directory."""

    work: Path
    data_dir: Path
    serve: Serve
    database: str = ""  # SQLite: no database server of its own to count

    @property
    def store(self) -> Path:
        return self.data_dir / "store"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.serve.port}"

    def pids(self) -> dict[str, int]:
        """The main process of each service (web, worker, watcher)."""
        return service_pids(self.data_dir)


@contextlib.contextmanager
def embedded(extra_env: dict[str, str] | None = None) -> Iterator[Embedded]:
    """`simrun serve` of a fresh installation, this process one of its clients."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-embedded-{os.getpid()}-"))
    data_dir = work / "simrun"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SIMRUN_", "DATABASE_", "CELERY_", "DJANGO_"))
    }
    env.update(
        SIMRUN_DATA_DIR=str(data_dir),
        SIMRUN_LOCAL_CORES="2",
        SIMRUN_LOCAL_MEMORY_GB="6",
        SIMRUN_LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
        **(extra_env or {}),
    )
    serve = Serve(data_dir, env, work)
    serve.start()
    try:
        os.environ.clear()
        os.environ.update(env)
        from runs.cli.base import setup_django

        setup_django()
        yield Embedded(work, data_dir, serve)
    finally:
        with contextlib.suppress(Exception):
            serve.stop()
        _kill_pods(data_dir / "store")
        shutil.rmtree(work, ignore_errors=True)

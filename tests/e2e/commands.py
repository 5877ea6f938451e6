"""The `simrun` command as a user runs it: a clean environment and a data directory of its own.

No PostgreSQL, no Redis: SQLite, the file broker and the local backend under that directory,
as on a fresh machine.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
SIMRUN = Path(sys.executable).parent / "simrun"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(data_dir: Path) -> dict[str, str]:
    """This environment without the test's settings, and `data_dir` as simrun's."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SIMRUN_", "DATABASE_", "CELERY_", "DJANGO_"))
    }
    env["SIMRUN_DATA_DIR"] = str(data_dir)
    return env


def demo(data_dir: Path, port: int, *options: str) -> subprocess.CompletedProcess[str]:
    """`simrun demo` as the README runs it (with `options`, e.g. `--keep`)."""
    return simrun(data_dir, "demo", "--port", str(port), *options)


def simrun(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A `simrun` command as a user types it, on `data_dir`."""
    return subprocess.run(
        [str(SIMRUN), *args],
        cwd=ROOT,
        env=clean_env(data_dir),
        capture_output=True,
        text=True,
        timeout=600,
    )


def processes_of(data_dir: Path) -> list[psutil.Process]:
    """The live processes started for `data_dir`: services (their SIMRUN_DATA_DIR), pod
    supervisors, pods and standbys, which have none but name a path under it in their
    command line, working directory or environment (a pod handed to a standby shows in
    /proc/<pid>/environ the environment the standby started with, not its attempt's)."""
    under = f"{data_dir}{os.sep}"
    found = []
    for proc in psutil.process_iter(["environ", "cmdline", "cwd", "status"]):
        if proc.pid == os.getpid() or proc.info.get("status") == psutil.STATUS_ZOMBIE:
            continue
        environ = proc.info.get("environ") or {}
        named = [*(proc.info.get("cmdline") or []), proc.info.get("cwd") or "", *environ.values()]
        if environ.get("SIMRUN_DATA_DIR") == str(data_dir) or any(under in n for n in named):
            found.append(proc)
    return found


def kill_all(data_dir: Path) -> None:
    for proc in processes_of(data_dir):
        with contextlib.suppress(psutil.Error):
            proc.kill()

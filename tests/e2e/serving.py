"""`simrun serve` as a user runs it, for the tests of serve, status, stop and the broker."""

from __future__ import annotations

import atexit
import contextlib
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from runs.cli.parent_death import dying_with_me
from tests.e2e.commands import ROOT, SIMRUN, clean_env, free_port
from tests.waiting import wait_for

SMALL_RUN = """\
name: small
tasks:
  - id: naps
    type: sleep
    settings: {{units: {units}, seconds: {seconds}}}
"""


@dataclass
class Serving:
    proc: subprocess.Popen[bytes]
    data_dir: Path
    port: int
    out: Path
    err: Path

    def said(self) -> tuple[str, str]:
        return self.out.read_text(), self.err.read_text()

    def simrun(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """`simrun ARGS` against this installation, as a user in another terminal runs it."""
        return subprocess.run(
            [str(SIMRUN), *args],
            cwd=ROOT,
            env=clean_env(self.data_dir),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def service(self, name: str) -> psutil.Process:
        """The main process of one service (web, worker, watcher), as serve started it."""
        children = psutil.Process(self.proc.pid).children()
        return next(p for p in children if _service_name(p) == name)


def _service_name(proc: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        line = " ".join(proc.cmdline())
        marks = (("web", "uvicorn"), ("beat", " beat"), ("worker", "celery"), ("watcher", "watch"))
        for name, mark in marks:
            if mark in line:
                return name
    return ""


def small_workflow(directory: Path, *, units: int = 4, seconds: float = 0.2) -> Path:
    """A workflow of one split task whose units sleep, and a model folder for it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model").mkdir(exist_ok=True)
    (directory / "model" / "README.md").write_text("no environment of its own\n")
    path = directory / "small.yaml"
    path.write_text(SMALL_RUN.format(units=units, seconds=seconds))
    return path


def processes_under(data_dir: Path) -> list[psutil.Process]:
    """Live processes of this installation: services, pod supervisors and pods (a pod has no
    SIMRUN_DATA_DIR of its own, but its directories are under the data dir)."""
    found = []
    for proc in psutil.process_iter(["environ", "cmdline", "status"]):
        if proc.info.get("status") == psutil.STATUS_ZOMBIE:
            continue
        environ = proc.info.get("environ") or {}
        text = " ".join(proc.info.get("cmdline") or []) + " " + " ".join(environ.values())
        if str(data_dir) in text:
            found.append(proc)
    return found


def zombies_of(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return [p for p in psutil.Process(pid).children() if p.status() == psutil.STATUS_ZOMBIE]
    return []


def kill_everything(data_dir: Path) -> None:
    for proc in processes_under(data_dir):
        with contextlib.suppress(psutil.Error):
            proc.kill()


_MIGRATED: list[Path] = []


def migrated_data_dir(data_dir: Path) -> Path:
    """`data_dir` made as `manage.py migrate` makes a new installation, copied from one made
    once per test session: a migration of a fresh SQLite database costs seconds, a copy
    nothing, and serve's own migrate then finds nothing to do."""
    if not _MIGRATED:
        made = Path(tempfile.mkdtemp(prefix="simrun-migrated-")) / "data"
        atexit.register(shutil.rmtree, made.parent, ignore_errors=True)
        done = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "migrate", "--no-input"],
            cwd=ROOT,
            env=clean_env(made),  # as serve runs it: SQLite and the file broker
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        _MIGRATED.append(made)
    shutil.copytree(_MIGRATED[0], data_dir)
    return data_dir


@contextmanager
def serving(
    tmp_path: Path,
    *,
    env: dict[str, str] | None = None,
    port: int = 0,
    name: str = "serve",
    data_dir: Path | None = None,
) -> Iterator[Serving]:
    """`simrun serve` until it says it serves; afterwards nothing of it is left running.
    Its data directory is `data_dir`, else `tmp_path/simrun` (a new one is a copy of a
    migrated installation); `port` 0 is a free one; `name` names its output files in
    `tmp_path` (a second serve of the same directory in one test)."""
    data_dir, port = data_dir or tmp_path / "simrun", port or free_port()
    if not data_dir.exists():
        migrated_data_dir(data_dir)
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            # SIGTERM to serve when this test session ends, however it ends: serve then
            # stops everything it started (nothing of a test outlives its session)
            dying_with_me([str(SIMRUN), "serve", "--port", str(port)], signum=signal.SIGTERM),
            cwd=ROOT,
            env={**clean_env(data_dir), **(env or {})},
            stdout=stdout,
            stderr=stderr,
        )
    try:
        wait_for(lambda: "serving on" in out.read_text(), timeout=120, what="simrun serving")
        yield Serving(proc, data_dir, port, out, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_everything(data_dir)


SCHEDULE = "celerybeat-schedule"


def beat_process(data_dir: Path) -> psutil.Process | None:
    """Celery beat: the process that holds the data directory's beat schedule open."""
    schedule = str(data_dir / SCHEDULE)
    for proc in processes_under(data_dir):
        with contextlib.suppress(psutil.Error):
            if any(f.path.startswith(schedule) for f in proc.open_files()):
                return proc
    return None


def run_state(served: Serving, run_id: str) -> str:
    """The run's state as `simrun show` prints it (its first line)."""
    shown = served.simrun("show", run_id, timeout=120)
    first = shown.stdout.splitlines()[0].split() if shown.returncode == 0 else []
    return first[3] if len(first) > 3 else ""


def submitted_run(result: subprocess.CompletedProcess[str]) -> str:
    """The id of the run a `simrun submit` said it submitted."""
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.split("submitted run ", 1)[1].split()[0]

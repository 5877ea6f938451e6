"""deploy/service/controller.sh keeps the worker and the watcher together: if one ends, both do.

The script runs for real, with stand-ins for `celery` and `python` on its PATH that record
their arguments and signals in files, so no Celery or database is needed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.deploy.manifests import DEPLOY
from tests.waiting import wait_for

SCRIPT = DEPLOY / "service" / "controller.sh"

# A stand-in process: on SIGTERM it writes <name>.terminated and exits 143; it writes its
# arguments to <name>.args once it can take the signal (whole: written aside, then renamed, so
# the file is never seen empty). With EXIT_<NAME> set it exits with that status as soon as
# both stand-ins have started.
STANDIN = """#!/usr/bin/env bash
name="$(basename "$0")"
trap 'touch "$RECORD/$name.terminated"; exit 143' TERM
echo "$@" > "$RECORD/.$name.args"
mv "$RECORD/.$name.args" "$RECORD/$name.args"
code_var="EXIT_${name^^}"
if [[ -n "${!code_var:-}" ]]; then
  until [[ -e "$RECORD/celery.args" && -e "$RECORD/python.args" ]]; do sleep 0.05; done
  exit "${!code_var}"
fi
while true; do sleep 0.05; done
"""


@pytest.fixture
def record(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("celery", "python"):
        (bin_dir / name).write_text(STANDIN)
        (bin_dir / name).chmod(0o755)
    out = tmp_path / "record"
    out.mkdir()
    return out


Start = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def start(record: Path) -> Iterator[Start]:
    """Starts the script (in a session of its own, its stand-ins with it); whatever of that
    session is left when the test ends, passed or failed, is killed."""
    started: list[subprocess.Popen[bytes]] = []

    def run(**exits: str) -> subprocess.Popen[bytes]:
        env = {
            "PATH": f"{record.parent / 'bin'}:/usr/bin:/bin",
            "RECORD": str(record),
            **{f"EXIT_{k.upper()}": v for k, v in exits.items()},
        }
        started.append(subprocess.Popen(["bash", str(SCRIPT)], env=env, start_new_session=True))
        return started[-1]

    yield run
    for process in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def both_started(record: Path) -> bool:
    return (record / "celery.args").exists() and (record / "python.args").exists()


def catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler for `signum` (a bash `trap`), from its SigCgt."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def test_it_starts_the_worker_with_beat_and_the_watcher(record: Path, start: Start) -> None:
    start()
    wait_for(lambda: both_started(record))
    assert (record / "celery.args").read_text().split()[:5] == [
        "-A",
        "simrun_site",
        "worker",
        "-B",
        "--loglevel=INFO",
    ]
    assert (record / "python.args").read_text().split() == ["manage.py", "simrun", "watch"]


def test_when_the_watcher_ends_the_worker_is_stopped_and_its_status_kept(
    record: Path, start: Start
) -> None:
    process = start(python="3")
    assert process.wait(timeout=30) == 3
    wait_for(lambda: (record / "celery.terminated").exists(), what="the worker got SIGTERM")


def test_sigterm_stops_both_processes(record: Path, start: Start) -> None:
    process = start()
    wait_for(lambda: both_started(record))
    # the script sets its trap after starting both: a SIGTERM sooner would end it alone
    wait_for(lambda: catches(process.pid, signal.SIGTERM), what="the script's trap of SIGTERM")
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) != 0
    assert (record / "celery.terminated").exists()
    assert (record / "python.terminated").exists()

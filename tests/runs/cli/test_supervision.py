"""serve's supervisor with real, tiny processes: restarts, giving up, its state file, stop."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from runs.cli.liveness import Prober, Sign
from runs.cli.restarts import RestartPolicy
from runs.cli.service_state import read_state
from runs.cli.supervision import GaveUp, Supervisor
from tests.waiting import wait_for

FAST = RestartPolicy(first_delay_s=0.05, max_delay_s=0.2, burst=2, window_s=60)
EXITS_3 = [sys.executable, "-c", "import sys; sys.exit(3)"]
STAYS = [sys.executable, "-c", "import time; time.sleep(300)"]


def supervisor(tmp_path: Path, commands: dict[str, list[str]], said: list[str]) -> Supervisor:
    return Supervisor(
        commands=commands,
        env={},
        cwd=tmp_path,
        data_dir=tmp_path,
        url="http://127.0.0.1:1/",
        policy=FAST,
        say=said.append,
    )


def test_a_crashing_service_is_restarted_with_backoff_then_given_up(tmp_path: Path) -> None:
    said: list[str] = []
    the_supervisor = supervisor(tmp_path, {"web": EXITS_3, "worker": STAYS}, said)
    the_supervisor.start()
    try:
        with pytest.raises(GaveUp) as gave_up:
            wait_for(lambda: the_supervisor.check(), timeout=60, what="giving up")
        state = read_state(tmp_path)
    finally:
        the_supervisor.stop(grace_s=5, pods_grace_s=5)

    log = tmp_path / "logs" / "web.log"
    assert said == [
        f"the web process exited with code 3; see {log}; restarting it in 0.05s (restart 1)",
        f"the web process exited with code 3; see {log}; restarting it in 0.1s (restart 2)",
    ]
    assert str(gave_up.value) == (
        "the web process exited with code 3, 3 times within 60s: not restarting it again; "
        f"stopping everything; see {log}"
    )
    assert state is not None
    services = {s.name: s for s in state.services}
    assert services["web"].restarts == 2
    assert services["worker"].restarts == 0
    assert services["worker"].state == "running"
    assert not (tmp_path / "services.json").exists()  # removed once stopped


def test_a_service_that_exits_once_runs_again(tmp_path: Path) -> None:
    marker = tmp_path / "ran-once"
    once = [
        sys.executable,
        "-c",
        f"import pathlib, sys, time\np = pathlib.Path({str(marker)!r})\n"
        "if not p.exists():\n    p.touch(); sys.exit(1)\ntime.sleep(300)\n",
    ]
    said: list[str] = []
    the_supervisor = supervisor(tmp_path, {"watcher": once}, said)
    the_supervisor.start()
    try:
        first = the_supervisor.services["watcher"].proc
        assert first is not None

        def running_again() -> bool:
            the_supervisor.check()
            proc = the_supervisor.services["watcher"].proc
            return proc is not first and proc is not None and proc.poll() is None

        wait_for(running_again, timeout=30, what="the watcher started again")
        state = read_state(tmp_path)
    finally:
        the_supervisor.stop(grace_s=5, pods_grace_s=5)

    assert state is not None and state.services[0].restarts == 1
    assert state.services[0].state == "running"
    assert len(said) == 1


def _silent_worker(tmp_path: Path, said: list[str], *, full_at: float) -> Supervisor:
    """A running `worker` whose last sign of life was 9 s ago, with a 5 s deadline, and a
    disk last seen full at `full_at`."""
    prober = Prober(
        data_dir=tmp_path, url="http://127.0.0.1:1/", deadline_s=5, disks=[], min_free=0, signs={}
    )
    the_supervisor = supervisor(tmp_path, {"worker": STAYS}, said)
    the_supervisor.prober = prober
    the_supervisor.start()
    now = time.time()
    the_supervisor.services["worker"].up_since = now - 10
    prober.signs["worker"] = Sign(now - 9, "answered a ping")
    prober.full_at = full_at
    return the_supervisor


def test_a_service_silent_past_its_deadline_is_killed_and_restarted(tmp_path: Path) -> None:
    said: list[str] = []
    the_supervisor = _silent_worker(tmp_path, said, full_at=0.0)
    old = the_supervisor.services["worker"].proc
    try:
        the_supervisor.check()
    finally:
        the_supervisor.stop(grace_s=5, pods_grace_s=5)

    assert old is not None and old.returncode == -9
    assert len(said) == 1 and said[0].startswith(
        "the worker process showed no sign of life for 9s (its last: answered a ping 9s ago); "
        "killed it; restarting it in 0.05s (restart 1)"
    ), said


def test_silence_while_the_disk_was_full_is_forgiven_until_the_deadline_passes_again(
    tmp_path: Path,
) -> None:
    """A disk full until a second ago explains the silence: the service gets the deadline
    again from then, not a restart that would free nothing."""
    said: list[str] = []
    the_supervisor = _silent_worker(tmp_path, said, full_at=time.time() - 1)
    old = the_supervisor.services["worker"].proc
    try:
        the_supervisor.check()
        running = old is not None and old.poll() is None
    finally:
        the_supervisor.stop(grace_s=5, pods_grace_s=5)

    assert running and said == []

"""Alive means making progress: `simrun serve` judges each service by a recent sign of work,
restarts one that shows none, and no killed process of a service freezes the others."""

from __future__ import annotations

import contextlib
import re
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.e2e.serving import (
    Serving,
    beat_process,
    run_state,
    serving,
    small_workflow,
    submitted_run,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

# a short deadline; the idle watcher passes each second, so a pass slowed by a loaded
# machine still ends well within it
FAST_LIVENESS = {"SIMRUN_LIVENESS_S": "6", "SIMRUN_IDLE_POLL_S": "1"}


def _worker_ready(served: Serving) -> bool:
    log = served.data_dir / "logs" / "worker.log"
    return log.exists() and " ready." in log.read_text(errors="replace")


def _service_now(served: Serving, name: str) -> psutil.Process | None:
    if name == "beat":
        return beat_process(served.data_dir)
    with contextlib.suppress(StopIteration, psutil.Error):
        return served.service(name)
    return None


def _replaced(served: Serving, name: str, old: int) -> bool:
    now = _service_now(served, name)
    return now is not None and now.pid != old and now.status() != psutil.STATUS_STOPPED


def _pool(worker: psutil.Process, beat: psutil.Process | None) -> list[psutil.Process]:
    """The worker's pool processes, if it has any: its children but beat."""
    with contextlib.suppress(psutil.Error):
        return [c for c in worker.children() if beat is None or c.pid != beat.pid]
    return []


def _reading(proc: psutil.Process) -> bool:
    """Whether the process waits in read(2): a pool process waiting for its next task, with
    the lock of the pool's shared queue held (its /proc syscall line starts with 0)."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{proc.pid}/syscall").read_text().split()[0] == "0"
    return False


def _tasks_done(served: Serving) -> int:
    log = served.data_dir / "logs" / "worker.log"
    return log.read_text(errors="replace").count(" succeeded in ") if log.exists() else 0


def test_killing_the_workers_pool_processes_never_freezes_submissions(tmp_path: Path) -> None:
    """kill -9 of the Celery worker's pool processes, if it has any, one after another while
    beat's reconcile tasks flow (up to 12 kills, the one waiting in read first): a run
    submitted afterwards is taken up and succeeds. With the prefork pool on a polling broker
    the pool's processes share one queue and its lock; one killed while holding it froze the
    others for good (celery#2011), in about half the kills."""
    workflow = small_workflow(tmp_path)
    with serving(tmp_path) as served:
        wait_for(lambda: _worker_ready(served), what="the worker ready")
        worker = served.service("worker")
        beat = beat_process(served.data_dir)
        for _ in range(12):
            pool = _pool(worker, beat)
            if not pool:
                break
            victim = next((p for p in pool if _reading(p)), pool[0])
            done = _tasks_done(served)
            with contextlib.suppress(psutil.Error):
                victim.kill()
            try:  # the pool replaced it and goes on with beat's tasks, or it froze
                wait_for(lambda d=done: _tasks_done(served) > d + 1, timeout=15)  # type: ignore[misc]
            except AssertionError:
                break
        run_id = submitted_run(
            served.simrun("submit", str(workflow), "--source", str(tmp_path / "model"))
        )
        state = wait_for(
            lambda: (s := run_state(served, run_id)) not in ("", "submitting") and s,
            timeout=90,
            what=f"run {run_id} taken up by the worker",
        )
        followed = served.simrun("follow", run_id, timeout=180)

    assert state in ("queued", "running", "succeeded"), state
    assert f"run {run_id} succeeded" in followed.stdout, followed.stdout + followed.stderr


def test_a_frozen_service_of_each_kind_is_restarted_with_its_cause(tmp_path: Path) -> None:
    """SIGSTOP of web, the Celery worker, beat and the watcher (each exists but makes no
    progress): serve sees no sign of life within SIMRUN_LIVENESS_S, kills each one's process
    group and starts it again, says why in one line each, and `simrun status` shows the
    restart, its cause and each service's last sign of life."""
    with serving(tmp_path, env=FAST_LIVENESS) as served:
        wait_for(
            lambda: "none yet" not in (s := served.simrun("status").stdout) and "beat" in s,
            timeout=90,
            what="a first sign of life of each service",
        )
        frozen = {}
        for name in ("web", "worker", "beat", "watcher"):
            proc = wait_for(lambda n=name: _service_now(served, n), what=f"the {name} process")
            proc.send_signal(signal.SIGSTOP)
            frozen[name] = proc.pid
        for name, pid in frozen.items():
            wait_for(
                lambda n=name, p=pid: _replaced(served, n, p),  # type: ignore[misc]
                timeout=90,
                what=f"the frozen {name} replaced",
            )
        status = wait_for(
            lambda: "none yet" not in (s := served.simrun("status")).stdout and s,
            timeout=90,
            what="a sign of life of every service again",
        )
        stderr = served.said()[1]

    for name in frozen:
        assert re.search(
            rf"^simrun: the {name} process showed no sign of life for \d+s .*; "
            rf"killed it; restarting it in \d+s \(restart 1\)$",
            stderr,
            re.M,
        ), stderr
        # at least one restart counted: on a loaded machine a service restarted here may
        # stay silent past this test's short deadline once more, and be restarted again
        assert re.search(
            rf"^{name} +running +\d+ +[-\d]+ [:\d]+ +[1-9]\d* +", status.stdout, re.M
        ), status.stdout
        assert re.search(
            rf"^  {name}: restarted .*no sign of life for \d+s", status.stdout, re.M
        ), status.stdout
    assert re.search(r"^web .*answered /healthz \d+ s ago", status.stdout, re.M), status.stdout


def test_a_killed_beat_is_restarted_and_reconciling_resumes(tmp_path: Path) -> None:
    """kill -9 of Celery beat (the process holding the beat schedule): serve starts it again
    and says so, and beat's reconcile passes (run by the worker) go on. Beat sends them every
    2 s here, not every 30 s: the pass after the restart comes without a long wait."""
    with serving(tmp_path, env={"SIMRUN_BEAT_POLL_S": "2"}) as served:
        wait_for(lambda: _worker_ready(served), what="the worker ready")
        beat = wait_for(lambda: beat_process(served.data_dir), what="the beat process")
        beat.kill()
        killed_at = time.time()
        wait_for(lambda: _replaced(served, "beat", beat.pid), timeout=60, what="beat started again")
        status = wait_for(
            lambda: (
                (s := served.simrun("status"))
                and _worker_reconciled_since(s.stdout, killed_at)
                and s
            ),
            timeout=60,
            interval=0.5,  # each look is a process of its own
            what="a reconcile by the worker after beat's restart",
        )
        stderr = served.said()[1]

    assert re.search(
        r"^simrun: the beat process exited with code -9; see .*beat\.log; ", stderr, re.M
    ), stderr
    assert re.search(r"^beat +running +\d+ .* 1 +", status.stdout, re.M), status.stdout


def _worker_reconciled_since(status: str, since: float) -> bool:
    """Whether `simrun status` shows a reconcile by the worker (beat's task) after `since`."""
    found = re.search(r"worker \S+ \S+ \((\d+) s ago\)", status)
    return found is not None and int(found[1]) < time.time() - since - 1

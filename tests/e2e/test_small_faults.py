"""Small faults of the embedded default that used to need a hand: partial unit outputs left by
a cancel or a lost attempt, a file in the broker's queue that is no message file, logs that
only grow."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from cluster.local.attempts import Attempt, read_attempts
from tests.e2e.serving import run_state, serving, small_workflow, submitted_run
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]


def test_a_cancel_leaves_no_partial_unit_output(tmp_path: Path) -> None:
    """Units being computed when their run is cancelled leave no half-written unit directory
    (`units/.<unit>.<worker>@<attempt>.<pid>`) once the pods have ended."""
    workflow = small_workflow(tmp_path, units=8, seconds=60)
    with serving(tmp_path, env={"SIMRUN_GRACE_S": "5"}) as served:
        run_id = submitted_run(
            served.simrun("submit", str(workflow), "--source", str(tmp_path / "model"))
        )
        task = served.data_dir / "store" / "runs" / run_id / "tasks" / "naps"
        units = task / "units"
        wait_for(
            lambda: units.is_dir() and any(p.name.startswith(".") for p in units.iterdir()),
            timeout=120,
            what="a unit being computed",
        )
        cancelled = served.simrun("cancel", run_id)
        pods = served.data_dir / "store" / "runs" / run_id / "pods"
        wait_for(
            lambda: all((a / "exit.json").exists() for a in pods.glob("naps-*/*")),
            timeout=60,
            what="the run's pods ended",
        )
        left = sorted(p.name for p in units.iterdir() if p.name.startswith("."))

    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    assert left == []


def test_a_fifo_in_the_broker_queue_is_moved_aside_and_the_worker_goes_on(
    tmp_path: Path,
) -> None:
    """A FIFO named like a message in `broker/in/` (reading it would wait for a writer for
    ever): the worker moves it to `broker/bad/` without opening it and takes up the run
    submitted after it."""
    workflow = small_workflow(tmp_path)
    with serving(tmp_path) as served:
        os.mkfifo(served.data_dir / "broker" / "in" / "1_fifo.simrun.msg")
        run_id = submitted_run(
            served.simrun("submit", str(workflow), "--source", str(tmp_path / "model"))
        )
        state = wait_for(
            lambda: (s := run_state(served, run_id)) not in ("", "submitting") and s,
            timeout=60,
            what=f"run {run_id} taken up by the worker",
        )
        bad = sorted(p.name for p in (served.data_dir / "broker" / "bad").iterdir())

    assert state in ("queued", "running", "succeeded")
    assert bad == ["1_fifo.simrun.msg"]


def test_service_logs_rotate_by_size_keeping_the_number_asked(tmp_path: Path) -> None:
    """With SIMRUN_LOG_MAX_BYTES=4000 and SIMRUN_LOG_BACKUPS=2, the web process's log (a
    line per refused request, 600 of them: some 15 kB) is rotated: web.log, web.log.1 and
    web.log.2, none over the size, and no third backup."""
    env = {"SIMRUN_LOG_MAX_BYTES": "4000", "SIMRUN_LOG_BACKUPS": "2"}
    with serving(tmp_path, env=env) as served:
        logs = served.data_dir / "logs"
        for _ in range(600):  # each refused request logs a line ("Unauthorized: ...")
            with contextlib.suppress(urllib.error.HTTPError):
                urllib.request.urlopen(f"http://127.0.0.1:{served.port}/api/runs/", timeout=30)
        wait_for(lambda: (logs / "web.log.2").exists(), what="two rotations of web.log")
        sizes = {p.name: p.stat().st_size for p in logs.glob("web.log*")}

    assert set(sizes) == {"web.log", "web.log.1", "web.log.2"}, sizes
    assert all(size <= 4000 for size in sizes.values()), sizes


def test_a_lost_attempt_leaves_no_partial_unit_output(tmp_path: Path) -> None:
    """kill -9 of the supervisors of a run's pods while units are computed: the backend
    finds each attempt lost, kills what is left of its pod and removes the unit outputs it
    left half written, before it records the attempt as ended."""
    workflow = small_workflow(tmp_path, units=8, seconds=60)
    with serving(tmp_path) as served:
        run_id = submitted_run(
            served.simrun("submit", str(workflow), "--source", str(tmp_path / "model"))
        )
        run_dir = served.data_dir / "store" / "runs" / run_id
        units = run_dir / "tasks" / "naps" / "units"
        wait_for(
            lambda: units.is_dir() and any(p.name.startswith(".") for p in units.iterdir()),
            timeout=120,
            what="a unit being computed",
        )
        # every attempt started so far has its supervisor and its pod process recorded and
        # running: a pod still starting when the others' supervisors are killed would
        # compute its units (a minute each) to the end
        started = wait_for(lambda: _running_attempts(run_dir), timeout=60, what="the pods")
        for attempt in started:
            assert attempt.supervisor is not None
            with contextlib.suppress(ProcessLookupError):
                os.kill(attempt.supervisor.pid, signal.SIGKILL)
        attempts = [attempt.path for attempt in started]
        partial = sorted(p.name for p in units.iterdir() if p.name.startswith("."))
        wait_for(
            lambda: all((a / "exit.json").exists() for a in attempts),
            timeout=60,
            what="the attempts found lost",
        )
        left = sorted(p.name for p in units.iterdir() if p.name in partial)
        lost = [json.loads((a / "exit.json").read_text()).get("lost") for a in attempts]

    assert partial
    assert lost and all(lost), lost
    assert left == []


def _running_attempts(run_dir: Path) -> list[Attempt] | None:
    """The attempts of the run's pods, once each has a live supervisor and pod process."""
    attempts = [a for pod in (run_dir / "pods").glob("naps-*") for a in read_attempts(pod)]
    running = all(
        a.supervisor is not None
        and a.supervisor.alive()
        and a.child is not None
        and a.child.alive()
        for a in attempts
    )
    return attempts if attempts and running else None

"""Nothing outlives the installation: whatever ends `simrun serve` ends what it started, a new
serve ends what a killed one left, and `simrun stop` ends every process of the installation."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.e2e.commands import ROOT, processes_of
from tests.e2e.serving import Serving, serving, small_workflow, submitted_run
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

# A pod that ignores SIGTERM: it outlives the grace serve's death or a stop gives it.
STUBBORN = """\
name: stubborn
tasks:
  - id: hold
    type: command
    settings:
      args:
        - sh
        - -c
        - trap '' TERM; touch "$SIMRUN_TASK_DIR/started"; while :; do sleep 1; done
"""
LONG_GRACE = {"SIMRUN_GRACE_S": "300"}


def _pod_started(served: Serving, tmp_path: Path) -> tuple[str, psutil.Process]:
    """Submit the stubborn run; its id and its pod process once it has started."""
    (tmp_path / "stubborn.yaml").write_text(STUBBORN)
    run_id = submitted_run(served.simrun("submit", str(tmp_path / "stubborn.yaml")))
    task = served.data_dir / "store" / "runs" / run_id / "tasks" / "hold"
    wait_for(lambda: (task / "started").exists(), timeout=90, what="the stubborn pod started")
    pods = [p for p in processes_of(served.data_dir) if p.name() == "sh"]
    assert len(pods) == 1, pods
    return run_id, pods[0]


def test_a_killed_serve_leaves_no_process_and_a_new_one_gets_its_port(tmp_path: Path) -> None:
    """kill -9 of serve alone: its web, worker, beat and watcher end with it (none is left
    holding the port or the data directory), `status` says nothing serves here, and a new
    serve starts on the same port."""
    with serving(tmp_path) as served:
        port = served.port
        wait_for(lambda: len(processes_of(served.data_dir)) >= 4, what="the services started")
        served.proc.kill()
        served.proc.wait()
        left = wait_for(
            lambda: not processes_of(served.data_dir),
            timeout=60,
            what="no process of the killed serve left",
        )
        status = served.simrun("status")
    with serving(tmp_path, port=port, name="again") as again:
        stdout = again.said()[0]

    assert left
    assert status.returncode == 3, status.stdout
    assert f"serving on http://127.0.0.1:{port}/" in stdout, stdout


def test_the_pods_of_a_killed_serve_end_with_it(tmp_path: Path) -> None:
    """kill -9 of serve while its pods compute (units of a minute): each pod's supervisor
    sees serve gone and stops its pod as on SIGTERM, so nothing of the installation is left
    within the grace, and the pods ended as preempted ones do (exit 143)."""
    workflow = small_workflow(tmp_path, units=4, seconds=60)
    with serving(tmp_path, env={"SIMRUN_GRACE_S": "5"}) as served:
        run_id = submitted_run(
            served.simrun("submit", str(workflow), "--source", str(tmp_path / "model"))
        )
        ledger = served.data_dir / "store" / "runs" / run_id / "tasks" / "naps" / "ledger"
        wait_for(lambda: list(ledger.glob("claimed/*")), timeout=120, what="a unit claimed")
        served.proc.kill()
        served.proc.wait()
        gone = wait_for(
            lambda: not processes_of(served.data_dir), timeout=45, what="the pods ended"
        )
        exits = [
            json.loads(p.read_text())["exit_code"]
            for p in (served.data_dir / "store" / "runs" / run_id / "pods").glob("*/*/exit.json")
        ]

    assert gone
    assert exits and set(exits) == {143}, exits


def test_stop_ends_the_pods_a_killed_serve_left_and_says_so(tmp_path: Path) -> None:
    """kill -9 of serve while a pod that ignores SIGTERM computes: `simrun stop` (nothing
    serves here any more) ends that pod, says which it ended, and leaves no process of the
    installation."""
    with serving(tmp_path, env=LONG_GRACE) as served:
        run_id, pod = _pod_started(served, tmp_path)
        served.proc.kill()
        served.proc.wait()
        stopped = served.simrun("stop")
        left = processes_of(served.data_dir)

    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not left, left
    assert re.search(rf"ended .*pod hold of run {run_id} \(pid {pod.pid}\)", stopped.stdout), (
        stopped.stdout
    )


def test_a_new_serve_ends_what_a_killed_one_left_and_says_so(tmp_path: Path) -> None:
    """kill -9 of serve while a pod that ignores SIGTERM computes, then `simrun serve` again:
    the new serve ends the pod the killed one left (its run's pod is started again, as after
    any lost attempt) and says what it ended."""
    with serving(tmp_path, env=LONG_GRACE) as served:
        run_id, pod = _pod_started(served, tmp_path)
        served.proc.kill()
        served.proc.wait()
        with serving(tmp_path, env=LONG_GRACE, name="again") as again:
            gone = wait_for(lambda: not pod.is_running(), timeout=30, what="the left pod ended")
            stdout, stderr = again.said()

    assert gone
    assert re.search(rf"ended .*pod hold of run {run_id} \(pid {pod.pid}\)", stdout + stderr), (
        stdout + stderr
    )


def test_a_serve_started_by_a_killed_test_session_ends_with_it(tmp_path: Path) -> None:
    """A pytest session that started serve with the tests' helper is killed with SIGKILL:
    serve and everything it started end too (nothing of a test outlives its session)."""
    env = {**os.environ, "PROBE_DIR": str(tmp_path)}
    with (tmp_path / "session.log").open("wb") as log:
        session = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                str(ROOT / "tests" / "e2e" / "session_probe.py"),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(
            lambda: session.poll() is not None or (tmp_path / "serve.pid").exists(),
            timeout=180,
            what="the probe session serving",
        )
        assert session.poll() is None, (tmp_path / "session.log").read_text()
        data_dir = tmp_path / "simrun"
        serve = psutil.Process(int((tmp_path / "serve.pid").read_text()))
        session.kill()
        session.wait()
        ended = wait_for(lambda: not processes_of(data_dir), timeout=60, what="serve ended")
    finally:
        session.kill()
        for proc in processes_of(tmp_path / "simrun"):
            proc.kill()

    assert ended
    assert not serve.is_running() or serve.status() == psutil.STATUS_ZOMBIE

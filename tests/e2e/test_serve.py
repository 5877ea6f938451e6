"""`simrun serve`: the embedded default's services, supervised, until Ctrl-C or `simrun stop`."""

from __future__ import annotations

import re
import signal
import subprocess
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.e2e.commands import ROOT, SIMRUN, clean_env, free_port
from tests.e2e.serving import (
    kill_everything,
    processes_under,
    serving,
    small_workflow,
    zombies_of,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]


def test_serve_answers_until_ctrl_c_then_leaves_nothing_running(tmp_path: Path) -> None:
    with serving(tmp_path) as served:
        url = f"http://127.0.0.1:{served.port}/healthz"
        with urllib.request.urlopen(url, timeout=10) as reply:
            assert reply.status == 200
        served.proc.send_signal(signal.SIGINT)
        code = served.proc.wait(timeout=90)
        gone = wait_for(lambda: not processes_under(served.data_dir), timeout=30, what="all gone")

    stdout, stderr = served.said()
    assert code == 0, stderr
    assert f"simrun is serving on http://127.0.0.1:{served.port}/" in stdout
    assert "`simrun status` shows its services, `simrun stop` stops it" in stdout
    assert gone


def test_a_killed_worker_and_watcher_are_restarted_and_the_run_in_flight_succeeds(
    tmp_path: Path,
) -> None:
    """kill -9 of the Celery worker, then of the watcher, while a run's units are being
    done: serve starts each again (said on stderr with the exit code and the log), `status`
    counts the restarts, the run succeeds with every unit once, and the pod supervisors the
    dead watcher left are reaped by serve (no zombie). C15: a restarted service continues."""
    workflow = small_workflow(tmp_path, units=12, seconds=1.0)
    with serving(tmp_path, env={"SIMRUN_GRACE_S": "5"}) as served:
        submitted = served.simrun("submit", str(workflow), "--source", str(tmp_path / "model"))
        assert submitted.returncode == 0, submitted.stderr
        run_id = re.search(r"submitted run (\w+)", submitted.stdout)[1]  # type: ignore[index]
        ledger = served.data_dir / "store" / "runs" / run_id / "tasks" / "naps" / "ledger"
        wait_for(lambda: list(ledger.glob("claimed/*")), timeout=120, what="a unit claimed")
        for name in ("worker", "watcher"):
            old = served.service(name)
            old.kill()
            wait_for(
                lambda name=name, old=old: _restarted(served, name, old.pid),  # type: ignore[misc]
                timeout=60,
                what=f"the {name} started again",
            )
        followed = served.simrun("follow", run_id)
        status = served.simrun("status")
        wait_for(lambda: not zombies_of(served.proc.pid), timeout=30, what="no zombie children")
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(timeout=120) == 0

    assert followed.returncode == 0, followed.stdout + followed.stderr
    assert f"run {run_id} succeeded" in followed.stdout
    done = sorted(p.name for p in (ledger / "done").iterdir())
    assert len(done) == 12, done
    stderr = served.said()[1]
    for name in ("worker", "watcher"):
        log = served.data_dir / "logs" / f"{name}.log"
        said = f"simrun: the {name} process exited with code -9; see {log}; restarting it in 1s"
        assert said in stderr, stderr
        assert re.search(rf"^{name} +running +\d+ +[\d-]+ [\d:]+ +1  ", status.stdout, re.M), (
            status.stdout
        )


def _restarted(served: object, name: str, old_pid: int) -> bool:
    try:
        return served.service(name).pid != old_pid  # type: ignore[attr-defined]
    except StopIteration:
        return False


def test_too_many_crashes_stop_serve_with_a_message(tmp_path: Path) -> None:
    """With SIMRUN_RESTART_BURST=1 the second crash of the web process within the window
    stops serve with exit 1, the reason and the log; nothing is left running."""
    with serving(tmp_path, env={"SIMRUN_RESTART_BURST": "1"}) as served:
        first = served.service("web")
        first.kill()
        wait_for(lambda: _restarted(served, "web", first.pid), timeout=60, what="web again")
        served.service("web").kill()
        code = served.proc.wait(timeout=90)
        gone = wait_for(lambda: not processes_under(served.data_dir), timeout=30, what="all gone")

    stderr = served.said()[1]
    log = served.data_dir / "logs" / "web.log"
    assert code == 1, stderr
    assert (
        "simrun: the web process exited with code -9, 2 times within 60s: not restarting it "
        f"again; stopping everything; see {log}"
    ) in stderr
    assert gone


def test_status_and_stop_from_another_terminal_stop_services_and_pods(tmp_path: Path) -> None:
    """`simrun status` lists web, worker and watcher with their pids and when the controller
    last reconciled; `simrun stop` stops
    serve, its services and the pods of a run in flight (their supervisors get SIGTERM, the
    rest is killed after the grace), leaving no process; `status` then says it is not running."""
    workflow = small_workflow(tmp_path, units=6, seconds=60)
    with serving(tmp_path, env={"SIMRUN_GRACE_S": "3"}) as served:
        submitted = served.simrun("submit", str(workflow), "--source", str(tmp_path / "model"))
        assert submitted.returncode == 0, submitted.stderr
        runs = served.data_dir / "store" / "runs"
        wait_for(lambda: list(runs.glob("*/tasks/naps/ledger/claimed/*")), timeout=120, what="pod")
        status = served.simrun("status")
        pids = {p.pid for p in psutil.Process(served.proc.pid).children()}
        stopped = served.simrun("stop")
        code = served.proc.wait(timeout=30)
        gone = not processes_under(served.data_dir)
        after = served.simrun("status")

    assert status.returncode == 0, status.stdout + status.stderr
    for name in ("web", "worker", "watcher"):
        line = re.search(rf"^{name} +running +(\d+) ", status.stdout, re.M)
        assert line and int(line[1]) in pids, status.stdout
    # the watcher had reconciled the run in flight: status says when, from its heartbeat row
    assert re.search(r"^last reconcile: +watcher \S+ \S+ \(\d+ s ago\)", status.stdout, re.M), (
        status.stdout
    )
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert code == 0
    assert gone
    assert after.returncode == 3
    assert "simrun is not running here" in after.stdout


def test_demo_keep_leaves_serve_running_for_status_and_stop(tmp_path: Path) -> None:
    """`demo --keep` prints the commands that show and stop what it left running, and a
    one-time login link to its pages; `status` lists the services, `stop` stops them all."""
    data_dir = tmp_path / "simrun"
    workflow = small_workflow(tmp_path)

    def simrun(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SIMRUN), *args],
            cwd=ROOT,
            env=clean_env(data_dir),
            capture_output=True,
            text=True,
            timeout=600,
        )

    try:
        demo = simrun(
            "demo",
            "--keep",
            "--port",
            str(free_port()),
            "--workflow",
            str(workflow),
            "--source",
            str(tmp_path / "model"),
        )
        login = re.search(
            r"^login: +(http://\S+/login/link/\S+/)  \(logs in as ", demo.stdout, re.M
        )
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        opened = browser.open(login[1], timeout=30).status if login else None
        status = simrun("status")
        stopped = simrun("stop")
        gone = wait_for(lambda: not processes_under(data_dir), timeout=60, what="all gone")
    finally:
        kill_everything(data_dir)

    assert demo.returncode == 0, demo.stdout + demo.stderr
    # the owner opens the pages it left running with the one-time link it printed
    assert login and opened == 200, demo.stdout
    assert "`simrun status` shows them" in demo.stdout
    assert "stop them with `simrun stop`" in demo.stdout
    assert status.returncode == 0, status.stdout + status.stderr
    for name in ("web", "worker", "watcher"):
        assert re.search(rf"^{name} +running +\d+ ", status.stdout, re.M), status.stdout
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert gone


def test_demo_while_serve_runs_joins_it_and_leaves_it_running(tmp_path: Path) -> None:
    """A `demo` in a data directory that `serve` already serves runs its workflow on that
    serve (no second serve, which would refuse the directory) and leaves it serving."""
    workflow = small_workflow(tmp_path)
    with serving(tmp_path) as served:
        services = {p.pid for p in psutil.Process(served.proc.pid).children()}
        demo = served.simrun(
            "demo", "--workflow", str(workflow), "--source", str(tmp_path / "model")
        )
        still = served.proc.poll() is None
        after = {p.pid for p in psutil.Process(served.proc.pid).children()}

    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert f"already serving this data directory at http://127.0.0.1:{served.port}/" in (
        demo.stdout
    )
    assert re.search(r"^state: +succeeded$", demo.stdout, re.M), demo.stdout
    assert f"services: left at http://127.0.0.1:{served.port}/" in demo.stdout
    assert still and services <= after

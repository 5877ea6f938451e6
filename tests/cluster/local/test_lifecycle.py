"""The life of a run beyond its pods: cancel, stop, a restarted service, subscriptions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psutil

from cluster.local.attempts import read_attempts
from cluster.local.backend import LocalBackend
from runs.ports import PodPhase, WorkflowPhase
from tests.cluster.local.builders import command_task, fake_environment, launch, split_task
from tests.waiting import wait_for

SPAWNS_AND_WAITS = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
time.sleep(120)
"""
IGNORES_SIGTERM = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ignoring SIGTERM", flush=True)
time.sleep(120)
"""


def run_processes(store: Path, run_id: str) -> list[psutil.Process]:
    """Every live supervisor, pod process and descendant of a run."""
    found: dict[int, psutil.Process] = {}
    for pod_dir in (store / "runs" / run_id / "pods").iterdir():
        for attempt in read_attempts(pod_dir):
            proc = attempt.supervisor.process() if attempt.supervisor else None
            if proc is not None:
                found.update((p.pid, p) for p in [proc, *proc.children(recursive=True)])
    return list(found.values())


def alive(proc: psutil.Process) -> bool:
    """Whether a process still runs (a zombie, ended but not yet collected, does not)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_cancel_ends_every_process_of_the_run_and_skips_waiting_pods(
    backend: LocalBackend, store: Path
) -> None:
    """Cancel: SIGTERM to every pod, SIGKILL after the grace to one that ignores it."""
    spawner = command_task("spawner", SPAWNS_AND_WAITS)
    stubborn = command_task("stubborn", IGNORES_SIGTERM)
    later = command_task("later", "pass", deps=["spawner"])
    name = backend.submit(launch("r1", spawner, stubborn, later, grace_s=0))
    wait_for(lambda: len(run_processes(store, "r1")) == 5, what="2 supervisors, 3 processes")
    wait_for(lambda: "ignoring" in backend.logs(name, "stubborn")[0].text)
    processes = run_processes(store, "r1")

    backend.cancel(name)

    status = backend.status(name)
    assert status.phase is WorkflowPhase.STOPPED
    assert status.pods["later"].phase is PodPhase.SKIPPED
    wait_for(lambda: not any(alive(p) for p in processes), timeout=20)
    wait_for(lambda: backend.status(name).pods["stubborn"].phase is PodPhase.FAILED)
    assert backend.status(name).pods["stubborn"].exit_code == 137
    assert backend.status(name).pods["spawner"].exit_code == 143


def test_stop_terminates_extra_workers_and_lets_base_pods_finish(
    backend: LocalBackend, store: Path, tmp_path: Path
) -> None:
    """C5/K10: stopping a decided run skips what waits and ends the extra workers."""
    release = tmp_path / "release"
    env = fake_environment(
        store,
        "fake",
        {
            "simrun-worker": f"""
            import os, pathlib, signal, time
            if os.environ["SIMRUN_ROLE"] == "extra":
                signal.pause()
            while not pathlib.Path({str(release)!r}).exists():
                time.sleep(0.02)
            """,
            "simrun-merge": "pass\n",
        },
    )
    name = backend.submit(launch("r1", split_task("scan", 2), environment=env))
    wait_for(lambda: backend.status(name).pods["scan-w1"].phase is PodPhase.RUNNING)
    assert backend.status(name).pods["scan-w0"].phase is PodPhase.RUNNING

    backend.stop(name)

    wait_for(lambda: backend.status(name).pods["scan-w1"].phase is PodPhase.FAILED)
    status = backend.status(name)
    assert status.phase is WorkflowPhase.STOPPED
    assert status.pods["scan-w0"].phase is PodPhase.RUNNING
    assert status.pods["scan-merge"].phase is PodPhase.SKIPPED
    release.touch()
    wait_for(lambda: backend.status(name).pods["scan-w0"].phase is PodPhase.SUCCEEDED)
    assert backend.status(name).pods["scan-merge"].phase is PodPhase.SKIPPED


def test_a_new_backend_on_the_same_store_finds_the_running_pods_and_completes_the_run(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    """C15: the service keeps no state; a restarted one continues from the store."""
    go = tmp_path / "go"
    a = command_task(
        "a",
        f"""
        import pathlib, time
        while not pathlib.Path({str(go)!r}).exists():
            time.sleep(0.02)
        """,
    )

    def submit_with_a_first_service() -> str:
        first = make_backend()
        name = first.submit(launch("r1", a, command_task("b", "pass", deps=["a"])))
        wait_for(lambda: first.status(name).pods["a"].phase is PodPhase.RUNNING)
        return name  # the first backend is dropped here

    name = submit_with_a_first_service()
    second = make_backend()
    assert second.status(name).pods["a"].phase is PodPhase.RUNNING
    go.touch()
    wait_for(lambda: second.status(name).phase is WorkflowPhase.SUCCEEDED)
    assert second.status(name).pods["a"].attempts == 1


def test_subscribers_are_called_when_a_pod_changes(backend: LocalBackend) -> None:
    """B8: one background loop advances the runs and wakes the subscribers on a change."""
    ended = backend.store.run("r1").pods / ".ended"
    calls: list[bool] = []  # whether the run had ended, at each call
    backend.subscribe(lambda: calls.append(ended.exists()))
    name = backend.submit(launch("r1", command_task("t", "pass")))
    wait_for(lambda: calls)

    # the loop alone (nobody asks for the status) sees the pod end and the run close, and
    # says so: a call made once the run had ended (noted by the subscriber itself, for all
    # calls may be made before this line runs: the pod takes a moment, a loaded test longer)
    wait_for(lambda: any(calls), what="a call after the run ended")
    assert backend.status(name).phase is WorkflowPhase.SUCCEEDED
    backend.close()
    assert not backend._looping()

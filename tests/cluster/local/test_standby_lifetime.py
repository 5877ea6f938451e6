"""Standbys never leak: they end with their backend, their service, their environment; there
is at most one per environment, only for the most recently used ones; a dead one is never
handed work and is replaced; they hold no cores or memory of the node."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from cluster.local.atomic_files import locked, read_json
from cluster.local.attempts import ProcessId
from cluster.local.backend import LocalBackend
from cluster.local.doorbell import BELL_FILE, ring
from cluster.local.standby_files import LOCK_FILE, USED_FILE
from runs.ports import PodPhase, WorkflowPhase
from tests.cluster.local.builders import NODE, command_task, launch, shape
from tests.cluster.local.probe_environment import Probe, probe_environment
from tests.cluster.local.standbys import (
    POD,
    adopted,
    attempt_dir,
    finish,
    held_at_the_gate,
    imported_standby,
    live_standbys,
    run_probe,
    standby_dir,
    standby_processes,
    want_standby,
)
from tests.e2e.commands import processes_of
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def probe(store: Path, tmp_path: Path) -> Probe:
    return probe_environment(store / "environments", tmp_path / "probe-plugin")


@pytest.fixture
def keeping(
    make_backend: Callable[..., LocalBackend], store: Path, probe: Probe
) -> Iterator[Callable[..., LocalBackend]]:
    """Backends whose loop runs and keeps standbys (one environment's unless told)."""

    def make(standby: int = 1) -> LocalBackend:
        backend = make_backend(standby=standby)
        backend.subscribe(lambda: None)
        return backend

    yield make
    for proc in standby_processes(store):
        with contextlib.suppress(psutil.Error):  # it may end since it was listed
            proc.kill()


def test_closing_the_backend_ends_its_standbys(keeping: Callable[..., LocalBackend]) -> None:
    backend = keeping()
    want_standby(backend, "probe")
    imported_standby(backend, "probe")
    assert len(standby_processes(backend.state)) == 2  # the supervisor and its pod process
    backend.close()
    wait_for(lambda: not standby_processes(backend.state), what="the standby to end")
    assert not live_standbys(backend, "probe")


def test_a_standby_ends_when_the_service_that_started_it_dies(store: Path, probe: Probe) -> None:
    """kill -9 of the service: the standby's stdin (a pipe from it) closes, so it ends."""
    service = textwrap.dedent(
        f"""
        import sys, threading
        sys.path.insert(0, {str(REPO)!r})
        from cluster.local.backend import LocalBackend
        backend = LocalBackend({str(store)!r}, cores=2, memory_gb=4, node_name={NODE!r},
                               priority_value={{}}, poll_s=0.1, standby=1)
        backend.subscribe(lambda: None)
        threading.Event().wait()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", service], start_new_session=True)
    try:
        marker = store / "local" / "standby" / "probe" / USED_FILE
        marker.parent.mkdir(parents=True)
        marker.touch()
        ring(store / "local" / BELL_FILE)  # as a launch's run rings it
        wait_for(lambda: list(marker.parent.glob("*.imported")), timeout=60)
        assert len(standby_processes(store)) == 2
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    wait_for(lambda: not standby_processes(store), what="the standby to end", timeout=20)
    assert not list(marker.parent.glob("*.json"))


def test_a_standby_ends_when_its_environment_is_removed(
    keeping: Callable[..., LocalBackend], probe: Probe
) -> None:
    backend = keeping()
    want_standby(backend, "probe")
    imported_standby(backend, "probe")
    shutil.rmtree(probe.root)
    wait_for(lambda: not standby_processes(backend.state), what="the standby to end")
    wait_for(lambda: not standby_dir(backend, "probe").exists(), what="its files to go")


def test_two_loops_on_one_store_keep_one_standby_per_environment(
    keeping: Callable[..., LocalBackend],
) -> None:
    """Two services (two watchers, say) pass over the same store: one standby between them."""
    first, second = keeping(), keeping()
    want_standby(first, "probe")
    imported_standby(first, "probe")
    for backend in (first, second, first, second):
        assert backend._standbys is not None
        backend._standbys.keep()
    assert len(live_standbys(first, "probe")) == 1
    assert len(standby_processes(first.state)) == 2


def test_only_the_most_recently_used_environments_keep_a_standby(
    keeping: Callable[..., LocalBackend], store: Path, probe: Probe, tmp_path: Path
) -> None:
    probe_environment(store / "environments", tmp_path / "other-plugin", name="other")
    backend = keeping(standby=1)
    want_standby(backend, "probe")
    imported_standby(backend, "probe")
    want_standby(backend, "other")
    an_hour_ago = time.time() - 3600
    os.utime(standby_dir(backend, "probe") / USED_FILE, (an_hour_ago, an_hour_ago))
    imported_standby(backend, "other")
    wait_for(lambda: not live_standbys(backend, "probe"), what="probe's standby to end")
    assert len(standby_processes(backend.state)) == 2


def test_a_standby_whose_supervisor_died_is_not_handed_work_and_is_replaced(
    keeping: Callable[..., LocalBackend], make_backend: Callable[..., LocalBackend]
) -> None:
    """Its FIFO has no reader: the launch starts a fresh supervisor (no attempt lost to the
    dead one), and the loop starts a new standby."""
    looping = keeping()
    want_standby(looping, "probe")
    dead = imported_standby(looping, "probe")
    launching = make_backend(standby=1)  # no loop: it claims standbys, never keeps them
    with locked(looping.state / "standby" / LOCK_FILE):  # the loop replaces none meanwhile
        os.kill(dead.pid, signal.SIGKILL)
        identity = ProcessId.from_json(read_json(dead.identity))
        assert identity is not None
        wait_for(lambda: not identity.alive())
        name = run_probe(launching, "r1")
    assert finish(launching, name) is WorkflowPhase.SUCCEEDED
    assert launching.status(name).pods[POD].attempts == 1  # not lost to the dead one
    assert not adopted(launching, "r1")
    replaced = imported_standby(looping, "probe")
    assert replaced.pid != dead.pid


def test_a_standby_whose_pod_process_died_is_replaced(
    keeping: Callable[..., LocalBackend],
) -> None:
    backend = keeping()
    want_standby(backend, "probe")
    first = imported_standby(backend, "probe")
    [pod] = [p for p in standby_processes(backend.state) if p.pid != first.pid]
    pod.kill()
    wait_for(lambda: imported_standby(backend, "probe").pid != first.pid)
    name = run_probe(backend, "r1")
    assert finish(backend, name) is WorkflowPhase.SUCCEEDED
    assert adopted(backend, "r1")


def test_a_standby_holds_none_of_the_node(keeping: Callable[..., LocalBackend]) -> None:
    """Idle, it is no running work: a pod that takes every core and all the memory starts."""
    backend = keeping()
    want_standby(backend, "probe")
    imported_standby(backend, "probe")
    assert backend.placements() == []
    whole = command_task("all", "import time; time.sleep(30)", pod=shape(cores=2, memory_gb=4))
    name = backend.submit(launch("r1", whole))
    wait_for(lambda: backend.status(name).pods["all"].phase is PodPhase.RUNNING)
    assert len(standby_processes(backend.state)) == 2
    backend.cancel(name)


def test_no_standby_is_started_while_pods_take_every_core(
    keeping: Callable[..., LocalBackend],
) -> None:
    """A new standby's imports would take a core from the units of a run that has them all:
    it is started once a core is idle again."""
    backend = keeping()
    whole = command_task("all", "import time; time.sleep(60)", pod=shape(cores=2, memory_gb=1))
    name = backend.submit(launch("r1", whole))
    wait_for(lambda: backend.status(name).pods["all"].phase is PodPhase.RUNNING)
    want_standby(backend, "probe")
    for _ in range(2):
        backend._pass()  # what the loop does (it passes beside this too)
    assert standby_processes(backend.state) == []
    backend.cancel(name)
    imported_standby(backend, "probe")


def test_a_standby_s_pod_process_dies_with_its_supervisor_even_while_it_imports(
    keeping: Callable[..., LocalBackend], probe: Probe
) -> None:
    """kill -9 of the supervisor while its pod process is inside an import (nothing reads
    the pipe from the supervisor then, so its end is not seen): the pod process goes too."""
    backend = keeping()
    with held_at_the_gate(probe) as held:
        want_standby(backend, "probe")
        pod = ProcessId.of(held())
        [supervisor] = live_standbys(backend, "probe")
        os.kill(supervisor, signal.SIGKILL)
        wait_for(lambda: not pod.alive(), timeout=20, what="the pod process to end")


def test_an_attempt_stopped_while_its_standby_still_imports_ends_at_once(
    keeping: Callable[..., LocalBackend], probe: Probe
) -> None:
    """A launch claims the standby while it imports (held at the gate); the run is cancelled:
    the attempt ends 143 without running — not once the imports are done, up to two
    minutes later — and the standby's pod process is killed."""
    backend = keeping()
    with held_at_the_gate(probe) as held:
        want_standby(backend, "probe")
        pod = ProcessId.of(held())
        name = run_probe(backend, "r1")
        wait_for((attempt_dir(backend, "r1") / "supervisor.json").exists)
        backend.cancel(name)
        wait_for(lambda: backend.status(name).pods[POD].phase is PodPhase.FAILED, timeout=20)
        assert backend.status(name).pods[POD].exit_code == 143
        assert not pod.alive()
    said = read_json(attempt_dir(backend, "r1") / "exit.json")
    assert said is not None and said["message"] == "not started"
    assert not (attempt_dir(backend, "r1") / "log").exists()


def test_the_check_that_nothing_is_left_running_sees_standbys(
    keeping: Callable[..., LocalBackend], store: Path
) -> None:
    """CI's check after the demo (tests/e2e/commands.py `processes_of`) finds a standby's
    supervisor and pod process, whose environments do not name the data directory (a pod
    handed to one shows the standby's in /proc/<pid>/environ, not its attempt's)."""
    backend = keeping()
    want_standby(backend, "probe")
    imported_standby(backend, "probe")
    standbys = {p.pid for p in standby_processes(store)}
    assert len(standbys) == 2
    assert standbys <= {p.pid for p in processes_of(store)}

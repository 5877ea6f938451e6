"""An idle local backend costs nothing: with no live run its loop waits for the doorbell (a
submission, a cancel, a pod's end ring it) rather than passing every `poll_s`; standbys go
once their environment has been idle for `standby_idle_s`, and while they are kept the loop
looks every few seconds (to replace one that died, to end them)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from cluster.local.backend import STANDBY_LOOK_S, LocalBackend
from cluster.local.standby_files import USED_FILE
from runs.ports import WorkflowPhase
from tests.cluster.local.builders import command_task, launch, shape
from tests.cluster.local.probe_environment import Probe, probe_environment
from tests.cluster.local.standbys import (
    imported_standby,
    live_standbys,
    standby_dir,
    standby_processes,
    want_standby,
)
from tests.waiting import wait_for


def test_with_no_live_run_the_loop_needs_no_unasked_pass(store: Path) -> None:
    """The wait after a pass: for good without runs (a ring ends it), the poll interval while
    a run is live."""
    backend = LocalBackend(store, cores=2, memory_gb=2)
    backend.tick()
    assert backend.quiet_s() == float("inf")

    backend.submit(launch("r1", command_task("hello", "pass", pod=shape(cores=64))))

    assert backend.quiet_s() is None


def test_a_quiet_loop_passes_when_a_submission_rings(store: Path) -> None:
    """No unasked pass for a minute, yet a run submitted from any process rings the loop:
    it passes (and its run is followed from then on at the poll interval)."""
    backend = LocalBackend(store, cores=2, memory_gb=2, poll_s=0.05)
    passes = [0]
    one_pass = backend._loop._pass

    def counted() -> object:
        passes[0] += 1
        return one_pass()

    backend._loop._pass = counted  # type: ignore[method-assign]
    backend.subscribe(lambda: None)
    try:
        wait_for(lambda: passes[0] >= 1 and backend.quiet_s() is not None, what="a pass")
        seen = passes[0]
        other = LocalBackend(store, cores=2, memory_gb=2)  # another process's submission
        name = other.submit(launch("r1", command_task("hello", "pass")))
        wait_for(lambda: passes[0] > seen, what="the loop's pass on the ring")
        wait_for(
            lambda: backend.status(name).phase is WorkflowPhase.SUCCEEDED,
            what="the run to end",
        )
    finally:
        backend.close()


@pytest.fixture
def probe(store: Path, tmp_path: Path) -> Probe:
    return probe_environment(store / "environments", tmp_path / "probe-plugin")


@pytest.fixture
def idle_after(
    make_backend: Callable[..., LocalBackend], store: Path, probe: Probe
) -> Iterator[Callable[[float], LocalBackend]]:
    """Backends whose loop keeps standbys, ended after `standby_idle_s`."""

    def make(idle_s: float) -> LocalBackend:
        backend = make_backend(standby=1, standby_idle_s=idle_s)
        backend.subscribe(lambda: None)
        return backend

    yield make
    for proc in standby_processes(store):
        with contextlib.suppress(psutil.Error):  # it may end since it was listed
            proc.kill()


def test_a_standby_ends_once_its_environment_is_idle(
    idle_after: Callable[[float], LocalBackend],
) -> None:
    """Its environment's pods last launched longer ago than the idle time: the standby ends
    (an idle service holds no imported interpreter), and none is started again."""
    backend = idle_after(300.0)
    want_standby(backend, "probe")
    imported_standby(backend, "probe")
    assert 0 < (backend.quiet_s() or 0) <= STANDBY_LOOK_S
    long_ago = time.time() - 301
    os.utime(standby_dir(backend, "probe") / USED_FILE, (long_ago, long_ago))

    wait_for(lambda: not standby_processes(backend.state), what="the standby to end")

    assert not live_standbys(backend, "probe")
    wait_for(lambda: backend.quiet_s() == float("inf"), what="nothing kept: no pass due")

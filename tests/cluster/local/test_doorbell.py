"""The doorbell: a pod's end makes the backend's loop pass at once, not at its interval."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from cluster.local.backend import LocalBackend
from cluster.local.doorbell import BELL_FILE, Doorbell, ring
from cluster.local.loop import CALM_S, QUIET_S, Loop, idle_wait
from runs.ports import WorkflowPhase
from tests.cluster.local.builders import NODE, command_task, launch, released_by
from tests.waiting import wait_for

AN_HOUR = 3600.0


def test_a_ring_from_another_process_wakes_the_listener(tmp_path: Path) -> None:
    bell = Doorbell(tmp_path / "bell")
    woken: list[bool] = []
    listener = threading.Thread(target=lambda: woken.append(bell.wait(AN_HOUR)))
    listener.start()
    code = "import sys, pathlib, cluster.local.doorbell as d; d.ring(pathlib.Path(sys.argv[1]))"
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "bell")], check=True, timeout=60)
    listener.join(timeout=60)
    assert woken == [True]
    bell.close()


def test_ringing_with_nobody_listening_does_nothing(tmp_path: Path) -> None:
    ring(tmp_path / "no-bell")  # no FIFO at all
    Doorbell(tmp_path / "bell").close()
    ring(tmp_path / "bell")  # a FIFO, but no loop holds it open
    assert not (tmp_path / "no-bell").exists()


def test_many_rings_before_a_wait_wake_it_once(tmp_path: Path) -> None:
    bell = Doorbell(tmp_path / "bell")
    for _ in range(10_000):  # more than the pipe holds: the rest are dropped, none blocks
        ring(tmp_path / "bell")
    assert bell.wait(AN_HOUR) is True
    assert bell.wait(0) is False
    bell.close()


def test_the_next_pod_starts_when_the_previous_one_ends_without_waiting_for_the_loop(
    make_backend: Callable[..., LocalBackend],
) -> None:
    """B8: with a loop that would pass only once an hour, a chain of two tasks still runs to
    its end: each supervisor rings when its pod ends, and the loop admits what follows."""
    backend = make_backend(poll_s=AN_HOUR)
    calls: list[int] = []
    backend.subscribe(lambda: calls.append(1))
    first = command_task("first", "pass")
    second = command_task("second", "pass", deps=["first"])
    name = backend.submit(launch("r1", first, second))
    wait_for(lambda: (backend.store.run("r1").pods / ".ended").exists(), timeout=60)
    assert backend.status(name).phase is WorkflowPhase.SUCCEEDED
    assert calls, "the subscriber was told"


def test_the_loop_waits_its_interval_while_passes_are_short() -> None:
    assert idle_wait(poll_s=0.25, last_pass_s=0.01) == 0.25


def test_with_long_passes_the_loop_waits_longer_so_it_never_takes_a_whole_core() -> None:
    """A pass of 1.5 s (a thousand live runs) is followed by 6 s without an unasked pass:
    at most a fifth of a core when nothing rings."""
    wait = idle_wait(poll_s=0.25, last_pass_s=1.5)
    assert wait == 6.0
    share_of_a_core = 1.5 / (1.5 + wait)
    assert share_of_a_core <= 0.2


def test_with_no_live_run_the_loop_waits_for_a_ring_until_something_is_due() -> None:
    """Nothing an unasked pass could catch: the owner's due time, at most `QUIET_S`."""
    assert idle_wait(poll_s=0.25, last_pass_s=0.01, quiet_s=float("inf")) == QUIET_S == 60.0
    assert idle_wait(poll_s=0.25, last_pass_s=0.01, quiet_s=3.0) == 3.0
    assert idle_wait(poll_s=0.25, last_pass_s=1.5, quiet_s=None) == 6.0


def test_unasked_passes_that_find_nothing_new_space_out_up_to_the_calm_limit() -> None:
    """A long scan's pods just compute: the loop does not read them four times a second."""
    waits = [idle_wait(poll_s=0.25, last_pass_s=0.01, calm=calm) for calm in range(6)]
    assert waits == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    assert CALM_S == 2.0


def test_an_interval_longer_than_the_calm_limit_stays_as_it_is() -> None:
    assert idle_wait(poll_s=5.0, last_pass_s=0.01, calm=0) == 5.0
    assert idle_wait(poll_s=5.0, last_pass_s=0.01, calm=4) == 5.0
    assert idle_wait(poll_s=0.25, last_pass_s=1.5, calm=4) == 6.0  # long passes still rule


class _Passes:
    """A pass that finds nothing new unless told there is a change."""

    def __init__(self) -> None:
        self.count = 0
        self.signature = 0

    def __call__(self) -> tuple[bool, int]:
        self.count += 1
        return False, self.signature


def test_a_ring_or_a_change_brings_the_calmed_loop_back_to_its_interval(tmp_path: Path) -> None:
    passes = _Passes()
    loop = Loop(passes, bell=tmp_path / "bell", poll_s=1.0)  # each wait is seen a second
    loop.subscribe(lambda: None)
    try:
        wait_for(lambda: loop.next_wait_s == CALM_S, timeout=60)  # 1, then 2 for good

        ring(tmp_path / "bell")  # the pass it brings finds nothing new, but it was asked for
        wait_for(lambda: loop.next_wait_s == 1.0, timeout=10)

        wait_for(lambda: loop.next_wait_s == CALM_S, timeout=60)
        passes.signature += 1  # the next (unasked) pass sees something new
        wait_for(lambda: loop.next_wait_s == 1.0, timeout=10)
    finally:
        loop.close()


def _listening(bell: Path) -> bool:
    """Whether a loop holds the bell open (a FIFO opens for writing only with a reader)."""
    try:
        os.close(os.open(bell, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        return False
    return True


def test_a_pod_started_by_another_process_s_pass_is_rung_to_the_loop(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    """The loop here would pass unasked only once an hour. Another process's backend (the
    web's, the worker's) starts a pod in its own pass, after `unreserve`: that pass rings,
    so the loop's subscribers hear of the pod at once."""
    elsewhere = make_backend(poll_s=AN_HOUR)  # no subscriber: no loop of its own
    elsewhere.reserve(NODE, "another-run")
    release = tmp_path / "release"
    # waits: the node is reserved for another run
    name = elsewhere.submit(launch("r1", command_task("t", released_by(release))))
    looping = make_backend(poll_s=AN_HOUR)
    told: list[int] = []
    looping.subscribe(lambda: told.append(1))
    wait_for(lambda: _listening(looping.state / BELL_FILE), timeout=30)
    assert not told, "nothing rang: the loop has not passed"

    elsewhere.unreserve(NODE, "another-run")  # its pass starts the pod

    wait_for(lambda: told, timeout=30, what="the loop to hear of the pod")
    release.touch()
    wait_for(lambda: looping.status(name).phase is WorkflowPhase.SUCCEEDED, timeout=60)

"""The watch thread that wakes reconciliation on every change of a run's workflow (B8)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from cluster.argo.backend import ArgoBackend
from tests.cluster.argo.builders import command_task, launch
from tests.cluster.argo.lab import Lab
from tests.sim.resources import CONFIGMAPS
from tests.waiting import wait_for


class Wakes:
    """A subscriber that counts its calls."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self) -> None:
        with self.lock:
            self.count += 1

    def more_than(self, before: int) -> Callable[[], bool]:
        return lambda: self.count > before


def quick_backend(lab: Lab) -> ArgoBackend:
    """A backend whose watch requests last one second."""
    assert lab.sim is not None
    backend = ArgoBackend(replace(lab.config, watch_timeout_s=1), lab.sim.api_client())
    lab.made.append(backend)
    return backend


def test_subscribers_are_woken_on_every_change_of_a_workflow_by_one_shared_thread(
    sim_lab: Lab,
) -> None:
    """B8: the first subscription starts the thread, later ones share it; a wake at the start
    covers what happened while nobody watched."""
    first, second = Wakes(), Wakes()
    sim_lab.backend.subscribe(first)
    sim_lab.backend.subscribe(second)
    wait_for(first.more_than(0), what="the wake at the start")
    assert sim_lab.backend.watch.threads_started == 1

    before = first.count
    sim_lab.backend.submit(launch("r1", command_task("t", "pass")))

    wait_for(first.more_than(before + 2), what="wakes as the workflow runs")
    wait_for(second.more_than(2))


def test_close_stops_the_thread_at_its_next_event(sim_lab: Lab) -> None:
    """B8: after close the thread ends; the controller's polling goes on without it."""
    wakes = Wakes()
    sim_lab.backend.subscribe(wakes)
    wait_for(wakes.more_than(0))
    sim_lab.backend.close()
    sim_lab.backend.submit(launch("r1", command_task("t", "pass")))
    assert sim_lab.backend.join_watch(timeout_s=30)
    assert not sim_lab.backend.watch.alive


def test_the_watch_starts_over_after_an_error(sim_lab: Lab) -> None:
    """B8: a watch whose version was compacted away (410 Expired) is started again from a new
    list; the subscribers keep being woken."""
    sim = sim_lab.sim
    assert sim is not None
    backend = quick_backend(sim_lab)
    wakes = Wakes()
    backend.subscribe(wakes)
    wait_for(wakes.more_than(0))
    sim.store.create(CONFIGMAPS, sim.namespace, {"metadata": {"name": "unrelated"}})
    sim.store.compact()

    wait_for(lambda: backend.watch.restarts >= 1, timeout=30, what="a restart of the watch")
    before = wakes.count
    backend.submit(launch("r1", command_task("t", "pass")))
    wait_for(wakes.more_than(before), what="wakes after the restart")
    assert backend.watch.alive


def test_a_failing_subscriber_does_not_stop_the_others(sim_lab: Lab) -> None:
    """B8: a subscriber that raises is logged; the thread goes on, and the others are told of
    this change and the next. (The thread may wake once when it starts, before the second
    subscriber is there: the changes waited for are submissions made after both subscribed.)"""
    wakes = Wakes()
    raised: list[int] = []

    def broken() -> None:
        raised.append(1)
        raise RuntimeError("a subscriber's bug")

    sim_lab.backend.subscribe(broken)
    sim_lab.backend.subscribe(wakes)
    sim_lab.backend.submit(launch("r1", command_task("t", "pass")))
    wait_for(lambda: raised and wakes.count, what="a change told to both subscribers")
    before = wakes.count
    sim_lab.backend.submit(launch("r2", command_task("t", "pass")))
    wait_for(wakes.more_than(before), what="the next change, after the subscriber raised")
    assert sim_lab.backend.watch.alive

"""A controller tick over many Argo workflows asks the API server once, whatever their number
(issue 21 item 1): one list of the runs' workflows, not a read per workflow, in the first tick
of a process (every run derived) as in the steady ones. The simulator's access log counts the
requests."""

from __future__ import annotations

import pytest

from runs.controller.seen import Seen
from runs.controller.tick import tick
from runs.models import Run
from tests.cluster.argo.lab import Lab
from tests.cluster.argo.test_controller import sleep_task, submit

pytestmark = pytest.mark.django_db


def tick_calls(lab: Lab, seen: Seen) -> list[tuple[str, str]]:
    """The API requests of one tick."""
    assert lab.sim is not None
    before = len(lab.sim.access_log)
    tick(lab.backend, seen=seen)
    return [(r.verb, r.resource) for r in lab.sim.access_log[before:]]


def test_a_ticks_api_calls_do_not_grow_with_the_workflows(sim_lab: Lab) -> None:
    assert sim_lab.sim is not None
    backend = sim_lab.backend
    calls = {}
    with sim_lab.sim.paused("kueue"):  # the pods stay gated: the statuses stay as they are
        for size in (2, 4):
            while Run.objects.count() < size:
                submit(backend, sleep_task("scan", 4, 0.1, split=2))
            seen = Seen()
            first = tick_calls(sim_lab, seen)  # a new process: every run derived
            steady = tick_calls(sim_lab, seen)
            restarted = tick_calls(sim_lab, Seen())
            calls[size] = (first, steady, restarted)
            assert set(Run.objects.values_list("state", flat=True)) == {"queued"}

    one_list = [("list", "workflows")]
    assert calls[2] == calls[4] == (one_list, one_list, one_list)

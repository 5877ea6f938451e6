"""A controller tick over many Argo workflows asks the API server the same whatever their
number: one list of the runs' workflows' metadata, not a read per workflow; then,
only when some workflow changed or the process has not noted a run, one list of those runs'
workflows. A restarted process reads no workflow whose revision is the one its record notes.
The simulator's access log counts the requests."""

from __future__ import annotations

import pytest

from cluster.argo.manifest import RUN_LABEL
from cluster.argo.watch import GROUP, PLURAL, VERSION
from runs.controller.seen import Seen
from runs.controller.tick import tick
from runs.models import Run
from tests.cluster.argo.lab import Lab
from tests.cluster.argo.test_controller import sleep_task, submit

pytestmark = pytest.mark.django_db


def tick_calls(lab: Lab, seen: Seen) -> list[tuple[str, str, str]]:
    """The API requests of one tick: verb, resource, and `metadata` for a list of metadata."""
    assert lab.sim is not None
    before = len(lab.sim.access_log)
    tick(lab.backend, seen=seen)
    return [(r.verb, r.resource, r.view) for r in lab.sim.access_log[before:]]


def test_a_ticks_api_calls_do_not_grow_with_the_workflows(sim_lab: Lab) -> None:
    assert sim_lab.sim is not None
    backend = sim_lab.backend
    calls = {}
    with sim_lab.sim.paused("kueue"):  # the pods stay gated: the statuses stay as they are
        for size in (2, 4):
            while Run.objects.count() < size:
                submit(backend, sleep_task("scan", 4, 0.1, split=2))
            sim_lab.sim.settle()  # Argo made every pod: the statuses stay as they are now
            seen = Seen()
            first = tick_calls(sim_lab, seen)  # a new process: every run derived
            versions = dict(Run.objects.values_list("pk", "version"))
            steady = tick_calls(sim_lab, seen)
            restarted = tick_calls(sim_lab, Seen())
            calls[size] = (first, steady, restarted)
            assert set(Run.objects.values_list("state", flat=True)) == {"queued"}
            assert dict(Run.objects.values_list("pk", "version")) == versions

    metadata = [("list", "workflows", "metadata")]
    whole = [("list", "workflows", "")]
    assert calls[2] == calls[4] == (metadata + whole, metadata, metadata)


def test_a_restarted_tick_reads_only_the_workflows_written_since_their_records(
    sim_lab: Lab,
) -> None:
    """A workflow written after its record was derived (here an annotation: its status is
    the same) is read by a restarted process, in one list of that run's workflow, and noted
    from its row without a write (its status's digest is the row's); the others are not."""
    assert sim_lab.sim is not None
    with sim_lab.sim.paused("kueue"):
        runs = [submit(sim_lab.backend, sleep_task("scan", 4, 0.1, split=2)) for _ in range(3)]
        sim_lab.sim.settle()  # Argo wrote every workflow's status: none changes after this
        tick(sim_lab.backend, seen=Seen())
        versions = dict(Run.objects.values_list("pk", "version"))
        sim_lab.backend.custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            sim_lab.config.namespace,
            PLURAL,
            runs[0].workflow_name,
            {"metadata": {"annotations": {"touched": "yes"}}},
        )
        before = len(sim_lab.sim.access_log)
        seen = Seen()

        tick(sim_lab.backend, seen=seen)

        lists = [(r.view, r.selector) for r in sim_lab.sim.access_log[before:]]
        assert lists == [("metadata", RUN_LABEL), ("", f"{RUN_LABEL} in ({runs[0].pk})")]
        assert dict(Run.objects.values_list("pk", "version")) == versions
        assert tick_calls(sim_lab, seen) == [("list", "workflows", "metadata")]


def test_a_workflow_written_with_its_status_unchanged_is_read_once_by_a_steady_process(
    sim_lab: Lab,
) -> None:
    """A workflow written after its record was derived here (an annotation: its status is the
    same) is read at the next tick, not derived, and noted at its new revision: the tick
    after reads nothing (gap found by mutation testing)."""
    assert sim_lab.sim is not None
    with sim_lab.sim.paused("kueue"):
        runs = [submit(sim_lab.backend, sleep_task("scan", 4, 0.1, split=2)) for _ in range(2)]
        sim_lab.sim.settle()  # Argo wrote every workflow's status: none changes after this
        seen = Seen()
        tick(sim_lab.backend, seen=seen)
        versions = dict(Run.objects.values_list("pk", "version"))
        sim_lab.backend.custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            sim_lab.config.namespace,
            PLURAL,
            runs[0].workflow_name,
            {"metadata": {"annotations": {"touched": "yes"}}},
        )

        assert tick_calls(sim_lab, seen) == [
            ("list", "workflows", "metadata"),
            ("list", "workflows", ""),
        ]
        assert tick_calls(sim_lab, seen) == [("list", "workflows", "metadata")]
        assert dict(Run.objects.values_list("pk", "version")) == versions

"""The status of many workflows at once, as a reconcile tick reads them (B1, B2).

Against the simulator: its access log shows which requests a call made.
"""

from __future__ import annotations

import pytest

from cluster.argo import listing
from cluster.argo.manifest import RUN_LABEL
from runs.ports import WorkflowPhase
from tests.cluster.argo.builders import command_task, launch
from tests.cluster.argo.lab import Lab
from tests.waiting import wait_for


def ended_runs(lab: Lab, count: int) -> list[str]:
    """`count` one-pod workflows, each ended (so their statuses stay as they are)."""
    names = [lab.backend.submit(launch(f"r{i}", command_task("t", "pass"))) for i in range(count)]
    for name in names:
        wait_for(
            lambda name=name: lab.backend.status(name).phase is WorkflowPhase.SUCCEEDED,
            timeout=60,
            what=f"{name} succeeded",
        )
    return names


def test_statuses_are_each_workflows_status_from_one_list_and_none_for_an_unknown_one(
    sim_lab: Lab,
) -> None:
    """B1: what `statuses` says of each workflow is what `status` says; a workflow that does
    not exist is None; one list of the workflows, no read of each."""
    assert sim_lab.sim is not None
    names = ended_runs(sim_lab, 3)
    before = len(sim_lab.sim.access_log)

    found = sim_lab.backend.statuses([*names, "simrun-nothing"])

    calls = [(r.verb, r.resource, r.view) for r in sim_lab.sim.access_log[before:]]
    assert calls == [("list", "workflows", "")]
    assert found == {**{n: sim_lab.backend.status(n) for n in names}, "simrun-nothing": None}


def test_statuses_of_more_workflows_than_a_page_are_all_read(
    sim_lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list is read page by page until its end."""
    assert sim_lab.sim is not None
    names = ended_runs(sim_lab, 3)
    monkeypatch.setattr(listing, "WHOLE_PAGE", 2)
    before = len(sim_lab.sim.access_log)

    found = sim_lab.backend.statuses(names)

    calls = [(r.verb, r.resource) for r in sim_lab.sim.access_log[before:]]
    assert calls == [("list", "workflows")] * 2
    assert {n: s.phase if s else None for n, s in found.items()} == dict.fromkeys(
        names, WorkflowPhase.SUCCEEDED
    )


def test_no_workflow_asked_makes_no_call(sim_lab: Lab) -> None:
    assert sim_lab.sim is not None
    before = len(sim_lab.sim.access_log)
    assert sim_lab.backend.statuses([]) == {}
    assert sim_lab.sim.access_log[before:] == []


def test_revisions_are_each_workflows_resource_version_from_one_list_of_their_metadata(
    sim_lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B1: what changed since the last tick, in one list of the workflows' metadata (page by
    page); a workflow that does not exist is left out."""
    assert sim_lab.sim is not None
    names = ended_runs(sim_lab, 3)
    monkeypatch.setattr(listing, "METADATA_PAGE", 2)
    before = len(sim_lab.sim.access_log)

    found = sim_lab.backend.revisions([*names, "simrun-nothing"])

    calls = [(r.verb, r.resource, r.view) for r in sim_lab.sim.access_log[before:]]
    assert calls == [("list", "workflows", "metadata")] * 2
    versions = {n: (sim_lab.sim.workflow(n) or {})["metadata"]["resourceVersion"] for n in names}
    assert found == versions


def test_after_the_revisions_a_few_statuses_are_read_by_their_run_label(
    sim_lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statuses of a few workflows come from one list of those runs' workflows only, by
    the run labels their metadata named; of more than `SELECTED_MAX`, or of one whose label
    is not known, from the list of every run's."""
    assert sim_lab.sim is not None
    names = ended_runs(sim_lab, 3)
    sim_lab.backend.revisions(names)
    labels = [(sim_lab.sim.workflow(n) or {})["metadata"]["labels"][RUN_LABEL] for n in names]

    def selectors(*asked: list[str]) -> list[str | None]:
        assert sim_lab.sim is not None
        before = len(sim_lab.sim.access_log)
        for wanted in asked:
            found = sim_lab.backend.statuses(wanted)
            assert found == {n: sim_lab.backend.status(n) if n in names else None for n in wanted}
        return [r.selector for r in sim_lab.sim.access_log[before:] if r.verb == "list"]

    assert selectors(names[:2]) == [f"{RUN_LABEL} in ({','.join(sorted(labels[:2]))})"]
    assert selectors([names[0], "simrun-nothing"]) == [RUN_LABEL]
    monkeypatch.setattr(listing, "SELECTED_MAX", 1)
    assert selectors(names[:2]) == [RUN_LABEL]

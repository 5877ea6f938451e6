"""Reservations: a taint and a label on a node, written under its resourceVersion (B4, B5, K4)."""

from __future__ import annotations

from typing import Any

import pytest

from runs.ports import PodPhase, WorkflowPhase
from tests.cluster.argo.builders import command_task, launch, shape
from tests.cluster.argo.lab import Lab
from tests.sim.resources import NODES
from tests.waiting import wait_for

NAP = "import time; time.sleep(120)"


def reservation(lab: Lab, name: str) -> tuple[str | None, list[dict[str, Any]]]:
    node = lab.node(name)
    label = (node["metadata"].get("labels") or {}).get("simrun/reserved")
    taints = [
        t for t in (node.get("spec") or {}).get("taints") or [] if t["key"] == "simrun/reserved"
    ]
    return label, taints


def test_reserving_taints_and_labels_the_node_and_replaces_an_earlier_reservation(lab: Lab) -> None:
    """B4: `simrun/reserved=<run>:NoExecute` and the label; a new reservation replaces one."""
    node = lab.workers[0]
    lab.backend.reserve(node, "r1")
    lab.backend.reserve(node, "r2")

    label, taints = reservation(lab, node)
    assert label == "r2"
    assert taints == [{"key": "simrun/reserved", "value": "r2", "effect": "NoExecute"}]
    assert [n.reserved_by for n in lab.backend.nodes() if n.name == node] == ["r2"]
    lab.backend.unreserve(node, "r2")


def test_unreserving_removes_only_this_runs_reservation(lab: Lab) -> None:
    """B5: another run's reservation stays; this run's goes, other taints stay."""
    node = lab.workers[1]
    lab.backend.reserve(node, "r1")
    lab.backend.unreserve(node, "r9")
    assert reservation(lab, node)[0] == "r1"

    lab.backend.unreserve(node, "r1")

    assert reservation(lab, node) == (None, [])
    assert [n.reserved_by for n in lab.backend.nodes() if n.name == node] == [None]


def test_an_unknown_node_cannot_be_reserved_or_released(sim_lab: Lab) -> None:
    """B4: B5: KeyError for a node that does not exist."""
    with pytest.raises(KeyError):
        sim_lab.backend.reserve("node-9", "r1")
    with pytest.raises(KeyError):
        sim_lab.backend.unreserve("node-9", "r1")


def test_a_change_of_the_node_between_read_and_write_is_not_lost(sim_lab: Lab) -> None:
    """B4: the patch carries the node's resourceVersion; on 409 the backend reads again."""
    sim = sim_lab.sim
    assert sim is not None
    core = sim_lab.backend.core
    read = core.read_node
    raced: list[str] = []

    def read_then_race(name: str, **kwargs: Any) -> Any:
        found = read(name, **kwargs)
        if not raced:  # another writer (a kubelet, an operator) changes the node now
            raced.append(name)
            sim.store.modify(NODES, "", name, lambda n: n["metadata"]["labels"].update(zone="a"))
        return found

    core.read_node = read_then_race  # type: ignore[method-assign]
    sim_lab.backend.reserve("node-1", "r1")

    node = sim_lab.node("node-1")
    assert node["metadata"]["labels"]["zone"] == "a"
    assert node["metadata"]["labels"]["simrun/reserved"] == "r1"
    patches = [r for r in sim.access_log if (r.verb, r.resource) == ("patch", "nodes")]
    assert len(patches) == 2


def test_a_reserved_runs_pods_go_to_its_node_and_other_runs_pods_leave_it(lab: Lab) -> None:
    """K4: admission adds the host to the node selector and honours the reservation's selector
    and toleration; the NoExecute taint evicts another run's pod, which runs elsewhere."""
    other = lab.backend.submit(launch("r1", command_task("nap", NAP, pod=shape(1, 0.5))))
    first = wait_for(lambda: lab.backend.status(other).pods["nap"].node, what="r1 placed")
    lab.past_argo_grace()

    lab.backend.reserve(first, "r2")
    mine = lab.backend.submit(
        launch("r2", command_task("own", NAP, pod=shape(1, 0.5)), reserve=first)
    )

    wait_for(lambda: lab.backend.status(mine).pods["own"].phase is PodPhase.RUNNING)
    pod = lab.pod(mine, "own")
    assert pod is not None
    assert pod["spec"]["nodeName"] == first
    assert pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] == first
    assert pod["spec"]["nodeSelector"]["simrun/reserved"] == "r2"

    def moved() -> bool:
        pod = lab.backend.status(other).pods["nap"]
        return pod.phase is PodPhase.RUNNING and pod.node not in (None, first)

    wait_for(moved, timeout=60, what="the other run's pod running on another node")
    status = lab.backend.status(other)
    assert status.phase is WorkflowPhase.RUNNING
    assert [f.exit_code for f in status.failures["nap"]] in ([None], [143])
    lab.backend.cancel(other)
    lab.backend.cancel(mine)
    lab.backend.unreserve(first, "r2")

"""Runs whose workflows grow past Argo's size limit, end to end on the simulator.

Argo compresses a large workflow's nodes into `status.compressedNodes` (or offloads them to
its database): the controller reads them there, or, when only the Argo server has them and
simrun is not given the server, keeps the run as it is and says so (docs/argo-backend.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from cluster.argo.argo_server import hydrated
from cluster.argo.backend import ArgoBackend
from cluster.argo.node_status import NodesUnreadable
from runs.controller.tick import tick
from runs.models import Run, Task
from runs.ports import PodPhase, WorkflowPhase
from runs.selectors.progress import task_progress
from runs.store import task_paths
from tests.cluster.argo.builders import launch, shape, split_task, write_task
from tests.cluster.argo.conftest import sim_lab_of
from tests.cluster.argo.lab import Lab
from tests.cluster.argo.test_controller import Settings, drive, settled, sleep_task, submit, units
from tests.sim import NodeStatusStorage
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db

NODES_ROOM = 3000
"""Room for the node status above the bare workflow: more than its nodes compressed, less
than its nodes as plain JSON once the scan's pods run."""


@pytest.fixture
def lab(tmp_path: Path, store: Path) -> Iterator[Lab]:
    """The simulator only (its Argo's limits are set by the tests)."""
    yield from sim_lab_of(tmp_path, store, {"node_status": NodeStatusStorage()})


def size(workflow: dict[str, Any] | None) -> int:
    return len(json.dumps(workflow, separators=(",", ":")))


def stored_status(lab: Lab, name: str) -> dict[str, Any]:
    """The workflow's status as the simulated Argo stored it ({} when it has none)."""
    assert lab.sim is not None
    found: dict[str, Any] = (lab.sim.workflow(name) or {}).get("status") or {}
    return found


def compressed(lab: Lab, name: str) -> bool:
    """Whether the stored workflow holds its nodes compressed only."""
    stored = stored_status(lab, name)
    return bool(stored.get("compressedNodes")) and not stored.get("nodes")


def test_a_split_scan_whose_workflow_argo_compresses_succeeds(
    lab: Lab, argo_settings: Settings
) -> None:
    """B13: the workflow crosses Argo's limit while the scan runs: its nodes go to
    status.compressedNodes, status.nodes is empty, and the run reads them there to its end
    with the right pods, task states and progress."""
    assert lab.sim is not None
    backend = argo_settings()
    with lab.sim.paused("argo"):
        run = submit(backend, sleep_task("scan", 12, 0.3))
        bare = size(lab.sim.workflow(run.workflow_name))
        lab.sim.packer.storage = NodeStatusStorage(max_workflow_size=bare + NODES_ROOM)
    live_and_compressed: list[str] = []

    def watched(found: Run) -> bool:
        if compressed(lab, found.workflow_name) and not found.ended:
            live_and_compressed.append(found.state)
        return settled(found)

    run = drive(backend, run.pk, watched)

    assert run.state == "succeeded", run.message
    assert "running" in live_and_compressed
    assert compressed(lab, run.workflow_name)
    pods = {"scan-w0", "scan-w1", "scan-w2", "scan-merge"}
    assert {p: run.pods[p]["phase"] for p in pods} == dict.fromkeys(pods, "succeeded")
    assert len({run.pods[f"scan-w{i}"]["node"] for i in range(3)}) == 3
    task = run.tasks.get(task_id="scan")
    assert (task.state, task.observed, task.logs_kept) == ("done", True, True)
    logs = task_paths(run.pk, "scan").logs
    kept = {p.name: p.read_text() for p in logs.glob("*.log")}
    assert set(kept) == {f"{p}-0.log" for p in pods}  # each attempt found in the nodes
    assert not any(text.startswith("[log not available") for text in kept.values()), kept
    counts = task_progress(task).counts
    assert counts is not None and (counts.done, counts.total) == (12, 12)
    assert units(run) == list(range(12))


def server_backend(lab: Lab, token: Path) -> ArgoBackend:
    """A backend given the simulated Argo server and a file of the token to send it."""
    assert lab.sim is not None
    config = replace(
        lab.config, argo_server_url=lab.sim.argo_server.url, argo_server_token_file=str(token)
    )
    backend = ArgoBackend(config, lab.sim.api_client())
    lab.made.append(backend)
    return backend


def test_offloaded_nodes_keep_the_run_and_say_so_until_the_argo_server_is_given(
    lab: Lab, argo_settings: Settings, tmp_path: Path
) -> None:
    """B13: Argo offloads the nodes of a running scan: without the Argo server the run keeps its
    state and its tasks', even after the workflow ended, and its message says what to set;
    given the server, its refusal (a wrong token) is the message, and once the token is
    right the same backend reads the nodes there (asked again, though the ended workflow no
    longer changes) and the run succeeds."""
    assert lab.sim is not None
    backend = argo_settings()
    run = drive(backend, submit(backend, sleep_task("scan", 9, 0.3)).pk, lambda r: r.pods != {})
    lab.sim.packer.storage = NodeStatusStorage(offload=True, always_offload=True)

    run = drive(backend, run.pk, lambda r: "Argo offloaded" in r.message)
    assert "SIMRUN_ARGO_SERVER_URL" in run.message and run.state in ("queued", "running")
    wait_for(
        lambda: stored_status(lab, run.workflow_name).get("phase") == "Succeeded",
        timeout=60,
        what="the workflow's end",
    )
    tick(backend)
    after_end = Run.objects.get(pk=run.pk)
    assert (after_end.state, after_end.message) == (run.state, run.message)
    assert Task.objects.get(run=run, task_id="scan").state not in ("failed", "done")

    token = tmp_path / "argo-token"
    token.write_text("not-the-token")
    with_server = server_backend(lab, token)
    run = drive(with_server, run.pk, lambda r: "answered 401" in r.message)
    assert "token not valid" in run.message and not run.ended
    token.write_text(lab.sim.argo_server.token + "\n")  # the same backend asks again
    run = drive(with_server, run.pk)

    assert (run.state, run.message) == ("succeeded", "")
    assert units(run) == list(range(9))
    assert run.tasks.get(task_id="scan").logs_kept
    assert (task_paths(run.pk, "scan").logs / "scan-merge-0.log").exists()
    assert lab.sim.packer.offloaded() > 0


def test_a_stop_deletes_the_gated_pods_of_a_compressed_workflow(lab: Lab) -> None:
    """B13: K10 with the nodes compressed: the stop reads which nodes Argo ended from
    status.compressedNodes and deletes the extras' gated pods (none is left waiting)."""
    assert lab.sim is not None
    others = lab.workers[1:]
    for node in others:
        lab.backend.reserve(node, "blocker")
    write_task(lab.store, "r1", "scan", "sleep", units=40, seconds=0.5)
    with lab.sim.paused("argo"):
        name = lab.backend.submit(launch("r1", split_task("scan", 3, pod=shape(3, 1))))
        bare = size(lab.sim.workflow(name))
        lab.sim.packer.storage = NodeStatusStorage(max_workflow_size=bare + 2500)
    status = lab.backend.status
    wait_for(lambda: status(name).pods["scan-w0"].phase is PodPhase.RUNNING, timeout=60)
    wait_for(lambda: lab.pod(name, "scan-w2"), what="the extras' pods", timeout=30)
    wait_for(lambda: compressed(lab, name), what="the nodes compressed", timeout=30)

    lab.backend.stop(name)

    assert compressed(lab, name)
    assert status(name).phase is WorkflowPhase.STOPPED
    assert status(name).pods["scan-w1"].phase is PodPhase.SKIPPED
    for extra in ("scan-w1", "scan-w2"):  # deleted (a gated pod goes at once), or stopped
        wait_for(partial(gone_or_failed, lab, name, extra), what=f"{extra} deleted")


def gone_or_failed(lab: Lab, workflow: str, pod: str) -> bool:
    found = lab.pod(workflow, pod)
    return found is None or found["status"]["phase"] == "Failed"


def test_what_the_argo_server_cannot_give_is_said(lab: Lab, tmp_path: Path) -> None:
    """B13: hydrated(): a workflow not offloaded is itself (no request); an unknown one, a wrong
    token, a server that is not there are NodesUnreadable naming the server and the cause."""
    assert lab.sim is not None
    token = tmp_path / "argo-token"
    token.write_text(lab.sim.argo_server.token)
    config = replace(
        lab.config, argo_server_url=lab.sim.argo_server.url, argo_server_token_file=str(token)
    )
    offloaded = {
        "metadata": {"name": "simrun-nothing"},
        "status": {"offloadNodeStatusVersion": "x"},
    }
    plain = {"metadata": {"name": "simrun-r1"}, "status": {"nodes": {}}}

    assert hydrated(plain, config) is plain
    assert lab.sim.argo_server.requests == []
    with pytest.raises(NodesUnreadable, match=r"answered 404 .*simrun-nothing.* not found"):
        hydrated(offloaded, config)
    token.write_text("wrong")
    with pytest.raises(NodesUnreadable, match=r"answered 401 .*token not valid"):
        hydrated(offloaded, config)
    gone = replace(config, argo_server_url="http://127.0.0.1:9")
    with pytest.raises(NodesUnreadable, match=r"the Argo server \(http://127.0.0.1:9\) cannot"):
        hydrated(offloaded, gone)
    missing = replace(config, argo_server_token_file=str(tmp_path / "none"))
    with pytest.raises(NodesUnreadable, match="token cannot be read"):
        hydrated(offloaded, missing)

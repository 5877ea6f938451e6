"""A workflow whose nodes cannot be read (offloaded, compressed past the limit, corrupt): its
status keeps the workflow's phase and message and says why its pods are unknown, so the
controller keeps the run as it was. Plain dicts, as Argo writes them. Gaps found by mutation
testing (docs/testing.md)."""

from __future__ import annotations

import base64
import gzip
import json

from cluster.argo.node_status import OFFLOADED
from cluster.argo.status import workflow_status
from runs.ports import BackendStatus, WorkflowPhase


def workflow(**status: object) -> dict[str, object]:
    return {
        "metadata": {"name": "simrun-r1"},
        "spec": {"entrypoint": "main", "templates": []},
        "status": {"phase": "Running", "message": "still going", **status},
    }


def compressed(nodes: dict[str, object]) -> str:
    return base64.b64encode(gzip.compress(json.dumps(nodes).encode())).decode()


def test_nodes_compressed_past_the_limit_give_an_unreadable_status_that_says_so() -> None:
    big = {f"n{i}": {"name": f"simrun-r1.t{i}", "phase": "Running"} for i in range(50)}

    status = workflow_status(workflow(compressedNodes=compressed(big)), limit_bytes=100)

    assert status == BackendStatus(
        phase=WorkflowPhase.RUNNING,
        message="still going",
        unreadable="status.compressedNodes decompresses to more than 100 bytes "
        "(SIMRUN_ARGO_NODES_LIMIT_MB)",
    )
    assert workflow_status(workflow(compressedNodes=compressed(big))).unreadable == ""


def test_offloaded_nodes_keep_the_workflows_phase_and_message() -> None:
    offloaded = workflow(offloadNodeStatusVersion="fnv:123")
    offloaded["status"]["phase"] = "Failed"  # type: ignore[index]

    status = workflow_status(offloaded)

    assert (status.phase, status.message, status.unreadable) == (
        WorkflowPhase.FAILED,
        "still going",
        OFFLOADED,
    )
    assert status.pods == {} and status.failures == {}


def test_a_workflow_without_a_status_message_has_none() -> None:
    bare = {"metadata": {"name": "simrun-r1"}, "status": {"compressedNodes": "not base64!"}}
    status = workflow_status(bare)
    assert (status.phase, status.message) == (WorkflowPhase.PENDING, "")
    assert status.unreadable == "status.compressedNodes is not base64"

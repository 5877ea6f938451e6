"""The simulated Argo's large workflows: nodes compressed, offloaded, read back (packing.py),
and the Argo server's API that answers them hydrated (server.py)."""

from __future__ import annotations

import base64
import gzip
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cluster.argo.node_status import decompress_nodes
from tests.sim import NodeStatusStorage, SimCluster
from tests.sim.argo.packing import fnv1_32
from tests.sim_tests.manifests import task, workflow

GROUP = ("argoproj.io", "v1alpha1")
BETWEEN = 2200
"""A limit the three-task workflow below crosses as it runs (~2.9 KB with its nodes at its
end, ~2.0 KB with them compressed) but not at its start."""


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    """Start a 3-node simulated cluster with the given storage of node status."""
    made: list[SimCluster] = []

    def started(storage: NodeStatusStorage) -> SimCluster:
        cluster = SimCluster(3, workdir=tmp_path / f"sim{len(made)}", node_status=storage)
        made.append(cluster.start())
        return cluster

    yield started
    for cluster in made:
        cluster.stop()
        assert cluster.errors == [], "the simulator's controllers raised"


def run_three_tasks(cluster: SimCluster, name: str = "wf") -> dict[str, Any]:
    """Submit a DAG a → (b, c) and return the workflow once it ended."""
    api = cluster.api_client()
    body = workflow(name, [task("a"), task("b", dependencies=["a"]), task("c", dependencies=["a"])])
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        *GROUP, cluster.namespace, "workflows", body
    )
    api.close()
    return cluster.wait_for_workflow(name)


def get(url: str, token: str | None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_workflow_past_the_limit_is_stored_compressed_and_still_runs_to_its_end(
    start: Any,
) -> None:
    """CompressWorkflowIfNeeded: status.nodes empty, compressedNodes base64 of gzip of their
    JSON; the controller reads them back each pass, so the DAG goes on to Succeeded."""
    cluster = start(NodeStatusStorage(max_workflow_size=BETWEEN))
    done = run_three_tasks(cluster)

    status = done["status"]
    assert status["phase"] == "Succeeded"
    assert "nodes" not in status and "offloadNodeStatusVersion" not in status
    nodes = json.loads(gzip.decompress(base64.b64decode(status["compressedNodes"])))
    assert decompress_nodes(status["compressedNodes"]) == nodes
    assert {n["name"] for n in nodes.values()} >= {"wf.a", "wf.b", "wf.c"}
    assert all(n["phase"] == "Succeeded" for n in nodes.values())
    assert base64.b64decode(status["compressedNodes"])[:10] == bytes.fromhex("1f8b08000000000000ff")
    assert (cluster.node_status("wf", "c") or {}).get("phase") == "Succeeded"


def test_a_workflow_below_the_limit_keeps_its_plain_nodes(start: Any) -> None:
    cluster = start(NodeStatusStorage(max_workflow_size=1024 * 1024))
    status = run_three_tasks(cluster)["status"]
    assert status["nodes"] and "compressedNodes" not in status


def test_a_workflow_too_large_even_compressed_fails_without_offloading(start: Any) -> None:
    """Dehydrate's error, as persistUpdates marks it: the workflow errors with Argo's text."""
    cluster = start(NodeStatusStorage(max_workflow_size=1000))
    status = run_three_tasks(cluster)["status"]
    assert status["phase"] == "Error"
    assert status["message"].startswith("workflow is longer than maximum allowed size. ")
    assert status["message"].endswith(
        "> maxSize 1000Tried to offload but encountered error: offload node status is not supported"
    )


def test_offloaded_nodes_leave_the_object_and_the_argo_server_answers_them(
    start: Any,
) -> None:
    """ALWAYS_OFFLOAD_NODE_STATUS: no nodes in the object, only `fnv:<FNV-1 of their JSON>`;
    the server's GET /api/v1/workflows/{ns}/{name} returns them hydrated, with the bearer
    token only."""
    cluster = start(NodeStatusStorage(offload=True, always_offload=True))
    done = run_three_tasks(cluster)

    status = done["status"]
    assert status["phase"] == "Succeeded"
    assert "nodes" not in status and "compressedNodes" not in status
    assert status["offloadNodeStatusVersion"].startswith("fnv:")
    url = f"{cluster.argo_server.url}/api/v1/workflows/{cluster.namespace}/wf"
    code, body = get(url, cluster.argo_server.token)
    assert code == 200
    assert "offloadNodeStatusVersion" not in body["status"]
    assert {n["name"] for n in body["status"]["nodes"].values()} >= {"wf.a", "wf.b", "wf.c"}
    version = json.dumps(body["status"]["nodes"], separators=(",", ":"), sort_keys=True)
    assert status["offloadNodeStatusVersion"] == f"fnv:{fnv1_32(version.encode())}"
    assert get(url, "wrong")[0] == 401 and get(url, None)[1]["code"] == 16
    assert get(url.replace("/wf", "/nope"), cluster.argo_server.token)[0] == 404


def test_fnv1_is_gos_hash_fnv_new32() -> None:
    """Known values of FNV-1 32 (not 1a): the empty input is the offset basis."""
    assert fnv1_32(b"") == 0x811C9DC5
    assert fnv1_32(b"a") == 0x050C5D7E
    assert fnv1_32(b"foobar") == 0x31F0B262

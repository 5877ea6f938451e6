"""Benchmark: a split task's workflow of many pods, its node status plain and as Argo
compresses it — the sizes that decide when Argo compresses and when it must offload, and the
cost of reading the status each way.

A split task of three pods runs to its end on the cluster simulator (`tests.sim`), submitted by
the `ArgoBackend`; its nodes, as the simulated Argo wrote them, are the template. Its extra
worker (a Retry node and its attempt below the TaskGroup) is repeated to N pods with their
own names, ids, start times and hosts, and the DAG task's `withSequence` is widened to match.
Per N: the workflow as JSON with plain nodes; `status.compressedNodes` as Argo writes it
(base64 of gzip at gzip's default level 6); and the median time (`--repeat` times) of reading
the status from the object's JSON each way (`json.loads` of the object, as a tick parses the
list of workflows, then `workflow_status`), whose ratio is the cost of the compressed form.

    nice -n 10 .venv/bin/python bench/argo/large_workflow.py [--pods 100 1000 5000 20000]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MIB = 1024 * 1024
EXTRA = "scan-extra"


def template_workflow(workdir: Path) -> dict[str, Any]:
    """A finished split task of three pods (coordinator, one extra group of two, merge)."""
    from cluster.argo.backend import ArgoBackend
    from tests.cluster.argo.builders import launch, split_task, write_task
    from tests.cluster.argo.lab import sim_config, start_sim
    from tests.waiting import wait_for

    store = workdir / "store"
    store.mkdir(parents=True)
    sim = start_sim(workdir, store)
    try:
        backend = ArgoBackend(sim_config(sim), sim.api_client())
        write_task(store, "b1", "scan", "sleep", units=3, seconds=0.05)
        name = backend.submit(launch("b1", split_task("scan", 3)))
        done = wait_for(
            lambda: (sim.workflow(name) or {}).get("status", {}).get("phase") == "Succeeded",
            timeout=120,
            what="the template workflow's end",
        )
        assert done
        found = copy.deepcopy(sim.workflow(name))
        backend.close()
    finally:
        sim.stop()
    assert found is not None
    return found


def widened(workflow: dict[str, Any], pods: int) -> dict[str, Any]:
    """The template with `pods - 2` extra workers (plus coordinator and merge)."""
    from tests.sim.argo.templates import node_id

    wf = copy.deepcopy(workflow)
    name = wf["metadata"]["name"]
    nodes: dict[str, Any] = wf["status"]["nodes"]
    group = next(n for n in nodes.values() if n["name"] == f"{name}.{EXTRA}")
    retry = nodes[group["children"][0]]
    attempt = nodes[retry["children"][0]]
    for child in group["children"]:
        for grandchild in nodes[child].get("children") or []:
            nodes.pop(grandchild, None)
        nodes.pop(child)
    group["children"] = []
    for index in range(pods - 2):
        item = index + 1
        retry_name = f"{name}.{EXTRA}({index}:{item})"
        new_retry, new_attempt = copy.deepcopy(retry), copy.deepcopy(attempt)
        new_retry.update(id=node_id(name, retry_name), name=retry_name)
        new_retry["displayName"] = f"{EXTRA}({index}:{item})"
        new_attempt.update(id=node_id(name, f"{retry_name}(0)"), name=f"{retry_name}(0)")
        new_attempt["displayName"] = f"{EXTRA}({index}:{item})(0)"
        new_attempt["hostNodeName"] = f"node-{index % 50 + 1}"
        new_attempt["startedAt"] = f"2026-12-03T10:{index // 60 % 60:02d}:{index % 60:02d}Z"
        new_retry["children"] = [new_attempt["id"]]
        nodes[new_retry["id"]] = new_retry
        nodes[new_attempt["id"]] = new_attempt
        group["children"].append(new_retry["id"])
    dag = next(t for t in wf["spec"]["templates"] if "dag" in t)
    extra = next(t for t in dag["dag"]["tasks"] if t["name"] == EXTRA)
    extra["withSequence"] = {"start": "1", "end": str(pods - 2)}
    return wf


def median_s(call: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(template: dict[str, Any], pods: int, repeat: int) -> dict[str, Any]:
    from cluster.argo.node_status import decompress_nodes
    from cluster.argo.status import workflow_status
    from tests.sim.argo.packing import compress_nodes

    plain = widened(template, pods)
    nodes = plain["status"]["nodes"]
    compressed = copy.deepcopy(plain)
    compressed["status"]["compressedNodes"] = compress_nodes(nodes)
    del compressed["status"]["nodes"]
    plain_text = json.dumps(plain, separators=(",", ":"))
    packed_text = json.dumps(compressed, separators=(",", ":"))
    plain_status = workflow_status(json.loads(plain_text))
    assert workflow_status(json.loads(packed_text)) == plain_status
    assert len(plain_status.pods) == pods
    # from the object's JSON, as a tick reads it from the list of workflows
    plain_s = median_s(lambda: workflow_status(json.loads(plain_text)), repeat)
    packed_s = median_s(lambda: workflow_status(json.loads(packed_text)), repeat)
    decode_s = median_s(lambda: decompress_nodes(compressed["status"]["compressedNodes"]), repeat)
    return {
        "pods": pods,
        "plain_bytes": len(plain_text),
        "compressed_bytes": len(packed_text),
        "nodes_json_bytes": len(json.dumps(nodes, separators=(",", ":"))),
        "compressed_nodes_bytes": len(compressed["status"]["compressedNodes"]),
        "status_plain_ms": plain_s * 1000,
        "status_compressed_ms": packed_s * 1000,
        "decompress_ms": decode_s * 1000,
        "ratio": packed_s / plain_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, nargs="+", default=[100, 1000, 5000, 20000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simrun_site.settings")
    with tempfile.TemporaryDirectory(prefix="bench-large-") as tmp:
        template = template_workflow(Path(tmp))
    print(f"load average: {os.getloadavg()}", flush=True)
    for pods in args.pods:
        found = measure(template, pods, args.repeat)
        print(json.dumps(found), flush=True)
    print(f"load average: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()

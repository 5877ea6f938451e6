"""The priority classes of the cluster are the ones runs/priorities.py defines."""

from __future__ import annotations

import subprocess
import sys

from runs import priorities
from tests.deploy.manifests import CLUSTER, DEPLOY, ROOT, Obj, documents

COMMITTED = CLUSTER / "priority-classes.yaml"


def test_the_committed_file_is_what_the_code_renders() -> None:
    rendered = subprocess.run(
        [sys.executable, str(DEPLOY / "priority_classes.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    ).stdout
    assert COMMITTED.read_text() == rendered, (
        "run: python deploy/priority_classes.py > deploy/cluster/priority-classes.yaml"
    )


def test_each_class_is_a_workload_and_a_pod_priority_class_of_the_same_value(
    cluster_objects: list[Obj],
) -> None:
    def values(kind: str) -> dict[str, int]:
        return {o["metadata"]["name"]: o["value"] for o in cluster_objects if o["kind"] == kind}

    expected = {c.name: c.value for c in priorities.classes()}
    assert values("WorkloadPriorityClass") == expected
    assert values("PriorityClass") == expected


def test_the_classes_rank_every_base_above_every_extra() -> None:
    ranked = [o["metadata"]["name"] for o in documents(COMMITTED) if o["kind"] == "PriorityClass"]
    assert ranked == [
        "simrun-owner",
        "simrun-person",
        "simrun-agent",
        "simrun-owner-extra",
        "simrun-person-extra",
        "simrun-agent-extra",
    ]
    values = [o["value"] for o in documents(COMMITTED) if o["kind"] == "PriorityClass"]
    assert values == sorted(values, reverse=True)
    assert len(set(values)) == 6


def test_no_class_is_the_default_for_pods_that_name_none() -> None:
    pod_classes = [o for o in documents(COMMITTED) if o["kind"] == "PriorityClass"]
    assert [o["globalDefault"] for o in pod_classes] == [False] * 6

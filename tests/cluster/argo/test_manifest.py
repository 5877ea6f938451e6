"""The workflow of a run as hera builds it: golden files, and each manifest rule on its own."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from cluster.argo.config import ClusterConfig
from cluster.argo.manifest import workflow_manifest
from cluster.argo.names import argo_name, label_value
from cluster.argo.pod_template import pod_spec_patch
from tests.cluster.argo.builders import command_task, launch, shape, split_task
from tests.cluster.argo.golden import assert_golden
from tests.sim.argo.templates import substitute

CONFIG = ClusterConfig(default_image="registry.cluster.internal:5000/simrun-service:0.4.0")
ARGO_NAME = re.compile(r"^[a-zA-Z0-9][-a-zA-Z0-9]*$")
AFTER = argo_name("after_scan")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


MERGE = shape(1, 1.5, scratch_gb=4, retry_memory_gb=2)


def split_run() -> dict[str, Any]:
    scan = split_task(
        "scan",
        3,
        pod=shape(3, 2.5, processes=3, gpus=1, scratch_gb=4, retry_memory_gb=4),
        merge=MERGE,
    )
    after = command_task("after_scan", "print('done')", deps=["scan"], image="python:3.13")
    return workflow_manifest(
        launch("r1", scan, after, grace_s=30, group="Lab Group/2025", reserve="node-1"), CONFIG
    )


SMALL = shape(2, 1.25, processes=2, retry_memory_gb=2)
BIG = shape(8, 4.25, processes=8, retry_memory_gb=6)
MID = shape(4, 2.25, processes=4, retry_memory_gb=3)


def shaped_run() -> dict[str, Any]:
    """A coordinator on a small node, two extras on big nodes, one on a mid node, a merge."""
    scan = split_task("scan", 4, pod=SMALL, extras=(BIG, BIG, MID), merge=MERGE)
    return workflow_manifest(launch("r3", scan, grace_s=30), CONFIG)


def merging_run() -> dict[str, Any]:
    scan = split_task("scan", 1, coordinator_merges=True)
    summary = split_task("summary", 1, deps=["scan"])
    return workflow_manifest(
        launch("r2", scan, summary, environment="0123abcd" * 8, grace_s=30), CONFIG
    )


def dag(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    entry = manifest["spec"]["templates"][0]
    assert entry["name"] == manifest["spec"]["entrypoint"]
    return {t["name"]: t for t in entry["dag"]["tasks"]}


def templates(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in manifest["spec"]["templates"][1:]}


def env(template: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in template["container"]["env"]}


def arguments(task: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in task["arguments"]["parameters"]}


def test_the_workflow_of_a_split_task_with_a_reader_matches_its_golden_file() -> None:
    """M1-M13: the whole manifest of a split run with a group and a reserved node."""
    assert_golden("split_run.yaml", split_run())


def test_the_workflow_of_a_merging_coordinator_matches_its_golden_file() -> None:
    """M1: M11: one pod, no extras, no merge pod; the reader waits for the coordinator."""
    assert_golden("merging_coordinator.yaml", merging_run())


def test_the_workflow_of_pods_of_different_shapes_matches_its_golden_file() -> None:
    """A shape per pod: a template per shape, a sequence per run of extras of one shape."""
    assert_golden("shaped_run.yaml", shaped_run())


def limits(template: dict[str, Any]) -> dict[str, str]:
    return dict(template["container"]["resources"]["limits"])


def test_each_pod_runs_a_template_of_its_own_shape() -> None:
    """The coordinator, each group of extras and the merge get their own resources, patch
    and SIMRUN_CORES; extras of one shape are one sequence."""
    manifest = shaped_run()
    tasks, made = dag(manifest), templates(manifest)
    assert tasks["scan-w0"]["template"] == "scan-worker"
    assert (tasks["scan-extra"]["template"], tasks["scan-extra"]["withSequence"]) == (
        "scan-worker-1",
        {"start": "1", "count": "2"},
    )
    assert (tasks["scan-extra-2"]["template"], tasks["scan-extra-2"]["withSequence"]) == (
        "scan-worker-2",
        {"start": "3", "count": "1"},
    )
    assert arguments(tasks["scan-extra-2"])["pod"] == "scan-w{{item}}"
    assert tasks["scan-extra-2"]["continueOn"] == {"failed": True, "error": True}
    cores = {name: limits(made[name])["cpu"] for name in made}
    assert cores == {
        "scan-worker": "2",
        "scan-worker-1": "8",
        "scan-worker-2": "4",
        "scan-merge": "1",
    }
    assert limits(made["scan-merge"]) == {
        "cpu": "1",
        "memory": "1536Mi",
        "ephemeral-storage": "4Gi",
    }
    assert env(made["scan-worker-1"])["SIMRUN_CORES"] == "8"
    assert env(made["scan-merge"])["SIMRUN_CORES"] == "1"
    assert json.loads(made["scan-worker-1"]["podSpecPatch"]) == json.loads(pod_spec_patch(BIG, 30))
    assert json.loads(made["scan-merge"]["podSpecPatch"]) == json.loads(pod_spec_patch(MERGE, 30))


def test_extras_sharing_the_coordinators_shape_share_its_template() -> None:
    scan = split_task("scan", 4, pod=MID, extras=(BIG, MID, MID), merge=MERGE)
    manifest = workflow_manifest(launch("r4", scan, grace_s=30), CONFIG)
    tasks = dag(manifest)
    assert set(templates(manifest)) == {"scan-worker", "scan-worker-1", "scan-merge"}
    assert (tasks["scan-extra"]["template"], tasks["scan-extra-2"]["template"]) == (
        "scan-worker-1",
        "scan-worker",
    )
    assert tasks["scan-extra-2"]["withSequence"] == {"start": "2", "count": "2"}


def test_a_split_task_is_a_coordinator_extras_over_a_sequence_and_a_merge_after_w0() -> None:
    """M1: M2: `<task>-w0`, `<task>-extra` over 1..pods-1 continuing on failure and error,
    `<task>-merge` depending on the coordinator only."""
    tasks = dag(split_run())
    assert arguments(tasks["scan-w0"]) == {
        "pod": "scan-w0",
        "task": "scan",
        "priority": "simrun-person",
        "role": "base",
    }
    extra = tasks["scan-extra"]
    assert extra["withSequence"] == {"start": "1", "count": "2"}
    assert extra["continueOn"] == {"failed": True, "error": True}
    assert arguments(extra)["pod"] == "scan-w{{item}}"
    assert arguments(extra)["priority"] == "simrun-person-extra"
    assert arguments(extra)["role"] == "extra"
    assert tasks["scan-merge"]["dependencies"] == ["scan-w0"]
    assert "dependencies" not in tasks["scan-w0"]


def test_one_pod_leaves_the_extras_out() -> None:
    """M1: a split task of one pod has no `<task>-extra`."""
    assert set(dag(merging_run())) == {"scan-w0", "summary-w0", "summary-merge"}


def test_a_reader_waits_for_the_merge_or_the_merging_coordinator() -> None:
    """M11: dependencies on a split task wait for its merge (its coordinator when it merges)."""
    assert dag(split_run())[AFTER]["dependencies"] == ["scan-merge"]
    assert dag(merging_run())["summary-w0"]["dependencies"] == ["scan-w0"]


def test_every_name_argo_checks_is_valid_and_pods_keep_the_task_ids() -> None:
    """Argo's template and task names allow no `_`; the pod names stay the controller's."""
    manifest = split_run()
    names = list(dag(manifest)) + list(templates(manifest))
    assert all(ARGO_NAME.match(n) for n in names), names
    pods = {arguments(t)["pod"] for t in dag(manifest).values()}
    assert pods == {"scan-w0", "scan-w{{item}}", "scan-merge", "after_scan"}


def test_every_pod_carries_queue_priority_topology_and_equal_requests_and_limits() -> None:
    """M4: Kueue's queue and priority labels, priorityClassName, one node per pod, requests
    equal to limits."""
    for name, template in templates(split_run()).items():
        metadata = template["metadata"]
        assert metadata["labels"]["kueue.x-k8s.io/queue-name"] == "simrun"
        assert metadata["labels"]["kueue.x-k8s.io/priority-class"] == template["priorityClassName"]
        assert metadata["annotations"] == {
            "kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname"
        }
        resources = template["container"]["resources"]
        assert resources["requests"] == resources["limits"], name
    worker = templates(split_run())["scan-worker"]
    assert worker["priorityClassName"] == "{{inputs.parameters.priority}}"


def test_every_pod_mounts_its_run_read_write_the_snapshots_read_only_and_its_scratch() -> None:
    """M4: the run's directory of the store read-write, the snapshots read-only, scratch per
    worker, merge and unsplit task on the node's disk."""
    manifest = split_run()
    mounts = templates(manifest)["scan-worker"]["container"]["volumeMounts"]
    assert mounts == [
        {"name": "store", "mountPath": "/mnt/simrun-store/runs/r1", "subPath": "runs/r1"},
        {
            "name": "store",
            "mountPath": "/mnt/simrun-store/snapshots",
            "subPath": "snapshots",
            "readOnly": True,
        },
        {
            "name": "scratch",
            "mountPath": "/scratch",
            "subPath": "r1/scan/{{inputs.parameters.pod}}",
        },
    ]
    volumes = {v["name"]: v for v in manifest["spec"]["volumes"]}
    assert volumes["store"]["persistentVolumeClaim"] == {"claimName": "simrun-store"}
    assert volumes["scratch"]["hostPath"] == {"path": "/scratch", "type": "DirectoryOrCreate"}


def test_workers_get_the_harness_environment_with_the_stale_time_of_grace_plus_60() -> None:
    """M3: M4: M10: the harness's variables; the attempt and the node reach the pod."""
    values = env(templates(split_run())["scan-worker"])
    assert values["SIMRUN_STALE_S"] == "90"
    assert values["SIMRUN_GRACE_S"] == "30"
    assert values["SIMRUN_WORKER"] == "{{inputs.parameters.pod}}"
    assert values["SIMRUN_ROLE"] == "{{inputs.parameters.role}}"
    assert values["SIMRUN_ATTEMPT"] == "{{retries}}"
    assert values["SIMRUN_NODE"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert values["SIMRUN_TASK_DIR"] == "/mnt/simrun-store/runs/r1/tasks/scan"
    assert values["SIMRUN_COORDINATOR_MERGES"] == "0"
    assert env(templates(merging_run())["scan-worker"])["SIMRUN_COORDINATOR_MERGES"] == "1"


def test_the_group_is_a_valid_label_hashed_when_changed_and_an_annotation_as_given() -> None:
    """M5: labels of the workflow and its pods; the annotation keeps the group as given."""
    manifest = split_run()
    label = manifest["metadata"]["labels"]["simrun/group"]
    assert LABEL_VALUE.match(label) and label.startswith("Lab-Group-2025-")
    assert manifest["metadata"]["annotations"] == {"simrun/group": "Lab Group/2025"}
    assert manifest["spec"]["podMetadata"]["labels"]["simrun/group"] == label
    assert manifest["spec"]["podMetadata"]["annotations"] == {"simrun/group": "Lab Group/2025"}


@pytest.mark.parametrize(
    "group",
    ["physics", "a" * 63, "a" * 64, "Ünïcode group", "-leading", "trailing.", "x/y", "__"],
)
def test_label_values_are_valid_and_unchanged_when_they_already_are(group: str) -> None:
    """M5: a valid value stays; any other becomes valid, ending in a hash of the text."""
    value = label_value(group)
    assert LABEL_VALUE.match(value) and len(value) <= 63
    valid = len(group) <= 63 and LABEL_VALUE.match(group)
    assert (value == group) == bool(valid)


def test_different_groups_never_share_a_label_value() -> None:
    """M5: the hash keeps two texts that clean to the same stem apart."""
    assert label_value("a b") != label_value("a/b")


def test_the_pods_run_as_the_workflow_service_account() -> None:
    """M6: the account Argo's wait container writes its results with."""
    assert split_run()["spec"]["serviceAccountName"] == "simrun-workflow"


def test_a_reserved_run_selects_its_node_and_tolerates_its_taint_whatever_the_effect() -> None:
    """M7: nodeSelector on the reservation label, a toleration without an effect."""
    spec = split_run()["spec"]
    assert spec["nodeSelector"] == {"simrun/reserved": "r1"}
    assert spec["tolerations"] == [{"key": "simrun/reserved", "operator": "Equal", "value": "r1"}]
    assert "nodeSelector" not in merging_run()["spec"]


def test_retries_are_stopped_attempts_only_at_most_100_policy_always() -> None:
    """M8: K7: K8: no exit code, 137 and 143 are retried, compared as strings; 3, 4 never."""
    for template in templates(split_run()).values():
        strategy = template["retryStrategy"]
        assert strategy["limit"] == 100
        assert strategy["retryPolicy"] == "Always"
        assert strategy["expression"] == (
            "lastRetry.exitCode == '-1' || lastRetry.exitCode == '137' "
            "|| lastRetry.exitCode == '143'"
        )


def attempt_patch(template: dict[str, Any], last_exit: str) -> dict[str, Any]:
    """The podSpecPatch of an attempt whose previous attempt exited `last_exit`, as Argo
    substitutes it (the simulator's expression evaluator)."""
    text = substitute(template["podSpecPatch"], {"lastRetry.exitCode": last_exit})
    return json.loads(text)


def test_the_attempt_after_an_exit_137_gets_the_retry_memory_and_every_attempt_the_grace() -> None:
    """M9: memory, memory per worker and processes follow the last attempt's exit; the
    termination grace is grace + 30 s."""
    worker = templates(split_run())["scan-worker"]
    first = attempt_patch(worker, "0")
    after_kill = attempt_patch(worker, "137")
    after_preemption = attempt_patch(worker, "-1")
    assert first["terminationGracePeriodSeconds"] == 60
    [main] = first["containers"]
    assert main["resources"] == {"requests": {"memory": "2560Mi"}, "limits": {"memory": "2560Mi"}}
    assert {e["name"]: e["value"] for e in main["env"]} == {
        "SIMRUN_MEMORY_LIMIT_GB": "2.5",
        "SIMRUN_MEMORY_PER_WORKER_GB": "0.25",
        "SIMRUN_PROCESSES": "3",
    }
    [retried] = after_kill["containers"]
    assert retried["resources"]["limits"] == {"memory": "4Gi"}
    assert {e["name"]: e["value"] for e in retried["env"]} == {
        "SIMRUN_MEMORY_LIMIT_GB": "4",
        "SIMRUN_MEMORY_PER_WORKER_GB": "0.5",
        "SIMRUN_PROCESSES": "3",
    }
    assert after_preemption == first


def test_the_workflow_is_named_from_the_run_labelled_with_it_and_has_a_ttl() -> None:
    """M12: name, run label on the workflow and its pods, a time to live after completion."""
    manifest = split_run()
    assert manifest["metadata"]["name"] == "simrun-r1"
    assert manifest["metadata"]["labels"]["simrun/run"] == "r1"
    assert manifest["spec"]["podMetadata"]["labels"]["simrun/run"] == "r1"
    assert manifest["spec"]["ttlStrategy"] == {"secondsAfterCompletion": 86400}


def test_gpus_and_ephemeral_storage_are_requested_only_when_the_shape_has_them() -> None:
    """M13."""
    with_them = templates(split_run())["scan-worker"]["container"]["resources"]["limits"]
    assert with_them == {
        "cpu": "3",
        "memory": "2560Mi",
        "nvidia.com/gpu": "1",
        "ephemeral-storage": "4Gi",
    }
    without = templates(merging_run())["scan-worker"]["container"]["resources"]["limits"]
    assert without == {"cpu": "1", "memory": "512Mi"}


def test_an_environment_digest_names_an_image_of_the_cluster_registry() -> None:
    """The environment of a model is an image of the registry; `service` the default."""
    image = templates(merging_run())["scan-worker"]["container"]["image"]
    assert image == "registry.cluster.internal:5000/simrun-environments:" + "0123abcd" * 8
    command = templates(split_run())[f"{AFTER}-pod"]["container"]
    assert command["image"] == "python:3.13"
    assert command["command"][1:] == ["-c", "print('done')"]


def test_a_pod_without_an_image_cannot_be_built() -> None:
    """B9: a run without an environment of its own and no default image is refused."""
    run = launch("r3", split_task("scan", 2))
    with pytest.raises(ValueError, match="SIMRUN_DEFAULT_IMAGE"):
        workflow_manifest(run, ClusterConfig())

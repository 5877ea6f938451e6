"""The simulated API server, driven through the real `kubernetes` client."""

from __future__ import annotations

import json
import threading
from typing import Any

import kubernetes
import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.sim import SimCluster
from tests.sim.fixtures import KubeApis
from tests.sim_tests.manifests import pod, workflow


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


def status_body(error: ApiException) -> dict[str, Any]:
    return json.loads(error.body)


def test_the_kubeconfig_it_writes_loads_with_load_kube_config(sim_cluster: SimCluster) -> None:
    kubernetes.config.load_kube_config(config_file=str(sim_cluster.kubeconfig))
    nodes = client.CoreV1Api().list_node().items
    assert [n.metadata.name for n in nodes] == ["node-1", "node-2", "node-3"]


def test_create_answers_201_and_a_taken_name_409_already_exists(kube: KubeApis) -> None:
    _, code, _ = kube.core.create_namespaced_config_map_with_http_info(
        kube.namespace, configmap("settings")
    )
    assert code == 201
    with pytest.raises(ApiException) as raised:
        kube.core.create_namespaced_config_map(kube.namespace, configmap("settings"))
    body = status_body(raised.value)
    assert (raised.value.status, body["kind"], body["reason"]) == (409, "Status", "AlreadyExists")
    assert body["message"] == 'configmaps "settings" already exists'


def test_a_missing_object_is_404_with_a_status_body(kube: KubeApis) -> None:
    with pytest.raises(ApiException) as raised:
        kube.custom.get_namespaced_custom_object(
            "argoproj.io", "v1alpha1", kube.namespace, "workflows", "nope"
        )
    body = status_body(raised.value)
    assert raised.value.status == 404
    assert body["reason"] == "NotFound"
    assert body["message"] == 'workflows.argoproj.io "nope" not found'
    assert body["details"] == {"name": "nope", "kind": "workflows", "group": "argoproj.io"}


def test_an_update_with_a_stale_resource_version_is_a_409_conflict(kube: KubeApis) -> None:
    created = kube.core.create_namespaced_config_map(kube.namespace, configmap("c"))
    kube.core.patch_namespaced_config_map("c", kube.namespace, {"data": {"k": "changed"}})
    created.data = {"k": "mine"}
    with pytest.raises(ApiException) as raised:
        kube.core.replace_namespaced_config_map("c", kube.namespace, created)
    assert raised.value.status == 409
    assert status_body(raised.value)["reason"] == "Conflict"
    assert "the object has been modified" in status_body(raised.value)["message"]


def test_a_patch_carrying_a_stale_resource_version_is_refused(kube: KubeApis) -> None:
    """The node's resourceVersion guards a patch of its taints.

    The cluster side of B4 (docs/behaviours.md), as the simulator reproduces it.
    """
    node = kube.core.read_node("node-1")
    taint = {"key": "simrun/reserved", "value": "r1", "effect": "NoExecute"}
    kube.core.patch_node("node-1", {"metadata": {"labels": {"touched": "yes"}}})
    with pytest.raises(ApiException) as raised:
        kube.core.patch_node(
            "node-1",
            {
                "metadata": {"resourceVersion": node.metadata.resource_version},
                "spec": {"taints": [taint]},
            },
        )
    assert raised.value.status == 409
    assert kube.core.read_node("node-1").spec.taints is None


def test_every_write_takes_the_next_global_resource_version(kube: KubeApis) -> None:
    listed = int(kube.core.list_node().metadata.resource_version)
    made = kube.core.create_namespaced_config_map(kube.namespace, configmap("a"))
    assert int(made.metadata.resource_version) > listed
    assert int(
        kube.core.list_namespaced_config_map(kube.namespace).metadata.resource_version
    ) >= int(made.metadata.resource_version)


def test_lists_filter_by_label_and_field_selectors(kube: KubeApis) -> None:
    for name, tier in (("a", "x"), ("b", "y"), ("c", "x")):
        kube.core.create_namespaced_config_map(kube.namespace, configmap(name, tier=tier))
    by_label = kube.core.list_namespaced_config_map(kube.namespace, label_selector="tier in (x)")
    assert [c.metadata.name for c in by_label.items] == ["a", "c"]
    by_field = kube.core.list_namespaced_config_map(
        kube.namespace, field_selector="metadata.name!=a", label_selector="tier=x"
    )
    assert [c.metadata.name for c in by_field.items] == ["c"]


def test_a_field_the_resource_does_not_index_is_a_400(kube: KubeApis) -> None:
    with pytest.raises(ApiException) as raised:
        kube.core.list_namespaced_config_map(kube.namespace, field_selector="data.k=v")
    assert raised.value.status == 400
    assert status_body(raised.value)["message"] == "field label not supported: data.k"


def test_lists_page_with_limit_and_continue(kube: KubeApis) -> None:
    for name in "abcde":
        kube.core.create_namespaced_config_map(kube.namespace, configmap(name))
    first = kube.core.list_namespaced_config_map(kube.namespace, limit=2)
    second = kube.core.list_namespaced_config_map(
        kube.namespace, limit=2, _continue=first.metadata._continue
    )
    assert [c.metadata.name for c in first.items + second.items] == ["a", "b", "c", "d"]


def test_a_watch_resumes_from_a_resource_version(kube: KubeApis) -> None:
    kube.core.create_namespaced_config_map(kube.namespace, configmap("before"))
    since = kube.core.list_namespaced_config_map(kube.namespace).metadata.resource_version
    kube.core.create_namespaced_config_map(kube.namespace, configmap("after"))
    kube.core.patch_namespaced_config_map("after", kube.namespace, {"data": {"k": "2"}})
    kube.core.delete_namespaced_config_map("before", kube.namespace)
    seen = []
    stream = watch.Watch()
    for event in stream.stream(
        kube.core.list_namespaced_config_map,
        kube.namespace,
        resource_version=since,
        timeout_seconds=5,
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 3:
            stream.stop()
    assert seen == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "before")]


def test_a_watch_streams_changes_made_while_it_waits(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    since = kube.core.list_namespaced_config_map(kube.namespace).metadata.resource_version

    def write_once_watched() -> None:
        sim_cluster.wait_for(lambda: any(r.verb == "watch" for r in sim_cluster.access_log))
        kube.core.create_namespaced_config_map(kube.namespace, configmap("later"))

    writer = threading.Thread(target=write_once_watched)
    writer.start()
    stream = watch.Watch()
    events = stream.stream(
        kube.core.list_namespaced_config_map,
        kube.namespace,
        resource_version=since,
        timeout_seconds=10,
    )
    first = next(events)
    stream.stop()
    writer.join()
    assert (first["type"], first["object"].metadata.name) == ("ADDED", "later")


def test_a_watch_from_a_compacted_resource_version_is_410_expired(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    since = kube.core.list_namespaced_config_map(kube.namespace).metadata.resource_version
    kube.core.create_namespaced_config_map(kube.namespace, configmap("x"))
    sim_cluster.store.compact()
    with pytest.raises(ApiException) as raised:
        for _ in watch.Watch().stream(
            kube.core.list_namespaced_config_map,
            kube.namespace,
            resource_version=since,
            timeout_seconds=5,
        ):
            pass
    assert raised.value.status == 410
    assert "Expired" in raised.value.reason


def test_a_watch_ends_after_its_timeout(kube: KubeApis) -> None:
    since = kube.core.list_namespaced_config_map(kube.namespace).metadata.resource_version
    events = list(
        watch.Watch().stream(
            kube.core.list_namespaced_config_map,
            kube.namespace,
            resource_version=since,
            timeout_seconds=1,
        )
    )
    assert events == []


def test_a_watch_of_custom_objects_yields_dicts(kube: KubeApis, sim_cluster: SimCluster) -> None:
    since = kube.custom.list_namespaced_custom_object(
        "argoproj.io", "v1alpha1", kube.namespace, "workflows"
    )["metadata"]["resourceVersion"]
    kube.custom.create_namespaced_custom_object(
        "argoproj.io", "v1alpha1", kube.namespace, "workflows", workflow("w", [])
    )
    stream = watch.Watch()
    events = stream.stream(
        kube.custom.list_namespaced_custom_object,
        "argoproj.io",
        "v1alpha1",
        kube.namespace,
        "workflows",
        resource_version=since,
        timeout_seconds=5,
    )
    first = next(events)
    stream.stop()
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "w")


def test_dict_patches_of_core_objects_merge_strategically(kube: KubeApis) -> None:
    """The client sends a dict as a strategic merge patch: containers merge by name."""
    kube.core.create_namespaced_pod(kube.namespace, pod("p", "import time; time.sleep(30)"))
    patched = kube.core.patch_namespaced_pod(
        "p",
        kube.namespace,
        {
            "metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "main", "image": "python:3.13"}]},
        },
    )
    assert patched.spec.containers[0].image == "python:3.13"
    assert patched.spec.containers[0].command is not None
    assert patched.metadata.labels == {"a": "b"}


def test_a_status_patch_changes_only_the_status(kube: KubeApis) -> None:
    before = kube.core.read_node("node-1")
    patched = kube.core.patch_node_status(
        "node-1",
        {
            "metadata": {"labels": {"ignored": "yes"}},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}]},
        },
    )
    assert {c.type for c in patched.status.conditions} == {"Ready", "MemoryPressure"}
    assert "ignored" not in patched.metadata.labels
    assert int(patched.metadata.resource_version) > int(before.metadata.resource_version)


def test_taints_are_replaced_whole_by_a_strategic_merge(kube: KubeApis) -> None:
    first = {"key": "a", "effect": "NoSchedule"}
    second = {"key": "b", "effect": "NoSchedule"}
    kube.core.patch_node("node-1", {"spec": {"taints": [first]}})
    node = kube.core.patch_node("node-1", {"spec": {"taints": [second]}})
    assert [t.key for t in node.spec.taints] == ["b"]


def test_a_list_body_is_sent_and_applied_as_a_json_patch(kube: KubeApis) -> None:
    kube.core.patch_node("node-1", [{"op": "add", "path": "/metadata/labels/x", "value": "1"}])
    assert kube.core.read_node("node-1").metadata.labels["x"] == "1"


def test_a_json_patch_test_that_fails_is_a_422(kube: KubeApis) -> None:
    with pytest.raises(ApiException) as raised:
        kube.core.patch_node("node-1", [{"op": "test", "path": "/metadata/name", "value": "n"}])
    assert raised.value.status == 422


def test_a_list_sent_as_a_merge_patch_to_a_custom_object_is_422(kube: KubeApis) -> None:
    kube.custom.create_namespaced_custom_object(
        "argoproj.io", "v1alpha1", kube.namespace, "workflows", workflow("w", [])
    )
    with pytest.raises(ApiException) as raised:
        kube.custom.patch_namespaced_custom_object(
            "argoproj.io",
            "v1alpha1",
            kube.namespace,
            "workflows",
            "w",
            [{"op": "add", "path": "/spec/shutdown", "value": "Stop"}],
        )
    assert raised.value.status == 422
    assert "couldn't get version/kind" in status_body(raised.value)["message"]


def test_a_strategic_merge_patch_of_a_custom_object_is_415(kube: KubeApis) -> None:
    kube.custom.create_namespaced_custom_object(
        "argoproj.io", "v1alpha1", kube.namespace, "workflows", workflow("w", [])
    )
    with pytest.raises(ApiException) as raised:
        kube.custom.patch_namespaced_custom_object(
            "argoproj.io",
            "v1alpha1",
            kube.namespace,
            "workflows",
            "w",
            {"spec": {"shutdown": "Stop"}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert raised.value.status == 415


def test_a_merge_patch_sets_a_workflow_field(kube: KubeApis) -> None:
    kube.custom.create_namespaced_custom_object(
        "argoproj.io", "v1alpha1", kube.namespace, "workflows", workflow("w", [])
    )
    patched = kube.custom.patch_namespaced_custom_object(
        "argoproj.io", "v1alpha1", kube.namespace, "workflows", "w", {"spec": {"shutdown": "Stop"}}
    )
    assert patched["spec"]["shutdown"] == "Stop"


def test_deleting_a_job_without_a_policy_orphans_its_pods_with_a_warning(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    job = {"metadata": {"name": "j"}, "spec": {"template": pod("x", "import time; time.sleep(30)")}}
    kube.batch.create_namespaced_job(kube.namespace, job)
    sim_cluster.wait_for(lambda: sim_cluster.pods(), what="the job's pod")
    _, code, headers = kube.batch.delete_namespaced_job_with_http_info("j", kube.namespace)
    assert code == 200
    assert "child pods are preserved" in headers["Warning"]
    (orphan,) = sim_cluster.pods()
    assert orphan["metadata"]["ownerReferences"] == []


def test_every_request_is_recorded_as_rbac_sees_it(kube: KubeApis, sim_cluster: SimCluster) -> None:
    kube.core.create_namespaced_config_map(kube.namespace, configmap("c"))
    kube.core.read_namespaced_config_map("c", kube.namespace)
    kube.core.list_node()
    log = [
        (r.verb, r.group, r.resource, r.namespace, r.subresource) for r in sim_cluster.access_log
    ]
    assert log == [
        ("create", "", "configmaps", "simrun", None),
        ("get", "", "configmaps", "simrun", None),
        ("list", "", "nodes", None, None),
    ]

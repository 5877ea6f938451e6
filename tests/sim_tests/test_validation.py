"""The simulated API server decodes as a real one under `fieldValidation`: asked `Strict` it
refuses unknown fields (Kubernetes' kinds by the strict schemas of the cluster's minor, Argo's
by hera's models, Kueue's by the schemas of the fields simrun uses); by default (`Warn`) it
drops them with a warning. Mistyped fields are refused whatever a client asks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from tests.sim import SimCluster
from tests.sim.fixtures import KubeApis
from tests.sim.resources import all_resources
from tests.sim.schemas import schema_validator
from tests.sim_tests.manifests import pod, task, worker_template, workflow

GROUP, VERSION = "argoproj.io", "v1alpha1"


STRICT = {"field_validation": "Strict"}


def refused(call: Any, *args: Any, **options: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as raised:
        call(*args, **options)
    return raised.value.status, json.loads(raised.value.body)


def test_every_served_kind_has_a_schema() -> None:
    unchecked = [r.kind for r in all_resources() if schema_validator(r.api_version, r.kind) is None]
    assert unchecked == []


def test_a_pod_with_an_unknown_field_is_refused_naming_its_path(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    body = pod("p")
    body["spec"]["containers"][0]["requests"] = {"cpu": "1"}  # belongs under resources
    code, status = refused(kube.core.create_namespaced_pod, kube.namespace, body, **STRICT)
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.containers[0].requests"'
    )
    assert sim_cluster.get_pod("p") is None


def test_a_mistyped_field_is_invalid_with_its_path_as_cause(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    body = pod("p")
    body["spec"]["terminationGracePeriodSeconds"] = "30"
    code, status = refused(kube.core.create_namespaced_pod, kube.namespace, body)
    assert (code, status["reason"]) == (422, "Invalid")
    assert status["message"].startswith(
        'Pod "p" is invalid: spec.terminationGracePeriodSeconds: Invalid value: "30": '
    )
    assert [c["field"] for c in status["details"]["causes"]] == [
        "spec.terminationGracePeriodSeconds"
    ]
    assert sim_cluster.get_pod("p") is None


def test_a_workflow_is_checked_against_argos_models(kube: KubeApis) -> None:
    template = worker_template()
    template["container"]["resource"] = {"limits": {"cpu": "1"}}
    body = workflow("w", [task("a")], template)
    code, status = refused(
        kube.custom.create_namespaced_custom_object,
        GROUP,
        VERSION,
        kube.namespace,
        "workflows",
        body,
        **STRICT,
    )
    assert code == 400
    assert status["message"].endswith(
        'strict decoding error: unknown field "spec.templates[1].container.resource"'
    )


def test_a_patch_leaving_an_unknown_field_is_invalid_and_changes_nothing(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    body = workflow("w", [task("a")], worker_template())
    kube.custom.create_namespaced_custom_object(GROUP, VERSION, kube.namespace, "workflows", body)
    code, status = refused(
        kube.custom.patch_namespaced_custom_object,
        GROUP,
        VERSION,
        kube.namespace,
        "workflows",
        "w",
        {"spec": {"shutdwn": "Stop"}},
        **STRICT,
    )
    assert (code, status["reason"]) == (422, "Invalid")
    assert status["message"] == (
        'Workflow.argoproj.io "w" is invalid: patch: Invalid value: '
        '"{"spec":{"shutdwn":"Stop"}}": strict decoding error: unknown field "spec.shutdwn"'
    )
    stored = sim_cluster.workflow("w")
    assert stored is not None and "shutdwn" not in stored["spec"]


def test_a_kueue_object_outside_its_enum_is_invalid(kube: KubeApis) -> None:
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "q"},
        "spec": {"preemption": {"withinClusterQueue": "Always"}},
    }
    code, status = refused(
        kube.custom.create_cluster_custom_object,
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        queue,
    )
    assert code == 422
    assert "spec.preemption.withinClusterQueue: Invalid value: " in status["message"]


def test_objects_read_back_can_be_written_again(kube: KubeApis, sim_cluster: SimCluster) -> None:
    """What the server sets (uid, status ...) validates: a replace of a read object passes."""
    queue = kube.custom.get_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", "simrun"
    )
    kube.custom.replace_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", "simrun", queue
    )
    node = kube.core.read_node("node-1")
    node.metadata.labels["extra"] = "yes"
    kube.core.replace_node("node-1", node)
    assert sim_cluster.errors == []


def test_by_default_an_unknown_field_is_dropped_with_a_warning(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """The server's default, `Warn` (what a client that does not ask strictness gets on a
    real cluster): the object is stored without the field; the answer warns of it."""
    body = pod("p")
    body["spec"]["containers"][0]["requests"] = {"cpu": "1"}
    reply = kube.core.create_namespaced_pod(kube.namespace, body, _preload_content=False)
    assert reply.status == 201
    assert reply.headers["Warning"] == '299 - "unknown field \\"spec.containers[0].requests\\""'
    stored = sim_cluster.pod("p")
    assert "requests" not in stored["spec"]["containers"][0]


def test_ignore_drops_an_unknown_field_silently_and_an_unknown_mode_is_invalid(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    body = pod("p")
    body["spec"]["containers"][0]["requests"] = {"cpu": "1"}
    reply = kube.core.create_namespaced_pod(
        kube.namespace, body, field_validation="Ignore", _preload_content=False
    )
    assert reply.status == 201 and "Warning" not in reply.headers
    code, status = refused(
        kube.core.create_namespaced_pod, kube.namespace, pod("q"), field_validation="Loose"
    )
    assert code == 422
    assert status["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: '
        '"Loose": supported values: "Ignore", "Strict", "Warn"'
    )
    assert sim_cluster.get_pod("q") is None

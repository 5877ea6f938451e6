"""The simulated API server refuses what a real one refuses beyond the schemas (names,
labels, quantities, requests over limits, required and immutable fields), with the same
codes and messages, and stores nothing (tests/sim/validation.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from tests.sim import SimCluster
from tests.sim.fixtures import KubeApis
from tests.sim_tests.manifests import pod, task, worker_template, workflow

STRICT = {"field_validation": "Strict"}
LABEL_VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def refused(call: Any, *args: Any, **options: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as raised:
        call(*args, **(STRICT | options))
    return raised.value.status, json.loads(raised.value.body)


def created_pod(kube: KubeApis, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return refused(kube.core.create_namespaced_pod, kube.namespace, body)


def test_requests_above_their_limits_are_invalid(kube: KubeApis, sim_cluster: SimCluster) -> None:
    body = pod("p")
    body["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "2", "memory": "1Gi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    code, status = created_pod(kube, body)
    assert (code, status["reason"]) == (422, "Invalid")
    assert status["message"] == (
        'Pod "p" is invalid: spec.containers[0].resources.requests: Invalid value: "2": '
        "must be less than or equal to cpu limit of 1"
    )
    assert status["details"] == {
        "name": "p",
        "kind": "Pod",
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "message": 'Invalid value: "2": must be less than or equal to cpu limit of 1',
                "field": "spec.containers[0].resources.requests",
            }
        ],
    }
    assert sim_cluster.get_pod("p") is None


def test_quantities_are_shown_in_their_canonical_form(kube: KubeApis) -> None:
    body = pod("p")
    body["spec"]["containers"][0]["resources"] = {
        "requests": {"memory": "2048Mi"},
        "limits": {"memory": "1.5Gi"},
    }
    _, status = created_pod(kube, body)
    assert status["message"].endswith(
        'requests: Invalid value: "2Gi": must be less than or equal to memory limit of 1536Mi'
    )


def test_a_malformed_quantity_is_a_decoding_error(kube: KubeApis, sim_cluster: SimCluster) -> None:
    code, status = created_pod(kube, pod("p", cpu="1.5.5"))
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: quantities must match the regular '
        "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )
    assert sim_cluster.get_pod("p") is None


def test_label_values_longer_than_63_or_with_a_space_are_invalid(kube: KubeApis) -> None:
    code, status = created_pod(kube, pod("p", labels={"group": "a" * 64}))
    assert code == 422
    assert status["message"] == (
        f'Pod "p" is invalid: metadata.labels: Invalid value: "{"a" * 64}": '
        "must be no more than 63 characters"
    )
    _, status = created_pod(kube, pod("p", labels={"group": "two words"}))
    assert status["message"] == (
        f'Pod "p" is invalid: metadata.labels: Invalid value: "two words": {LABEL_VALUE_RULE}'
    )


def test_a_label_key_with_a_bad_prefix_is_invalid(kube: KubeApis) -> None:
    _, status = created_pod(kube, pod("p", labels={"Simrun/pod": "x"}))
    assert status["message"].startswith(
        'Pod "p" is invalid: metadata.labels: Invalid value: "Simrun/pod": prefix part a '
        "lowercase RFC 1123 subdomain must consist of"
    )


def test_a_name_that_is_no_dns_subdomain_is_invalid(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    code, status = created_pod(kube, pod("Bad_Name"))
    assert code == 422
    assert status["message"] == (
        'Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC '
        "1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
        "start and end with an alphanumeric character (e.g. 'example.com', regex used for "
        "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    )
    assert sim_cluster.get_pod("Bad_Name") is None


def test_every_problem_is_listed_once_with_a_cause_each(kube: KubeApis) -> None:
    body = pod("p", labels={"ok": "-bad"})
    container = body["spec"]["containers"][0]
    del container["image"]
    container["name"] = "Main"
    code, status = created_pod(kube, body)
    assert code == 422
    message = status["message"]
    assert message.startswith('Pod "p" is invalid: [') and message.endswith("]")
    fields = [c["field"] for c in status["details"]["causes"]]
    assert fields == [
        "metadata.labels",
        "spec.containers[0].name",
        "spec.containers[0].image",
    ]
    assert "spec.containers[0].image: Required value" in message
    assert status["details"]["causes"][2]["reason"] == "FieldValueRequired"


def test_a_mount_of_no_volume_and_a_missing_container_list_are_invalid(kube: KubeApis) -> None:
    body = pod("p")
    body["spec"]["containers"][0]["volumeMounts"] = [{"name": "store", "mountPath": "/mnt"}]
    _, status = created_pod(kube, body)
    assert status["message"] == (
        'Pod "p" is invalid: spec.containers[0].volumeMounts[0].name: Not found: "store"'
    )
    empty = pod("q")
    empty["spec"]["containers"] = []
    _, status = created_pod(kube, empty)
    assert status["message"] == 'Pod "q" is invalid: spec.containers: Required value'


def test_a_toleration_with_a_value_and_exists_is_invalid(kube: KubeApis) -> None:
    toleration = {"key": "simrun/reserved", "operator": "Exists", "value": "r1"}
    _, status = created_pod(kube, pod("p", tolerations=[toleration]))
    assert status["details"]["causes"][0]["field"] == "spec.tolerations[0].operator"
    assert status["message"].endswith("value must be empty when `operator` is 'Exists'")


def test_a_pods_spec_is_immutable_but_for_its_images(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    kube.core.create_namespaced_pod(kube.namespace, pod("p", "import time; time.sleep(60)"))
    change = {"spec": {"containers": [{"name": "main", "args": ["x"]}]}}
    code, status = refused(kube.core.patch_namespaced_pod, "p", kube.namespace, change)
    assert code == 422
    assert status["message"].startswith(
        'Pod "p" is invalid: spec: Forbidden: pod updates may not change fields other than '
        "`spec.containers[*].image`,"
    )
    assert "args" not in sim_cluster.pod("p")["spec"]["containers"][0]
    image = {"spec": {"containers": [{"name": "main", "image": "other:2"}]}}
    kube.core.patch_namespaced_pod("p", kube.namespace, image, **STRICT)
    assert sim_cluster.pod("p")["spec"]["containers"][0]["image"] == "other:2"


def test_a_jobs_template_is_immutable(kube: KubeApis, sim_cluster: SimCluster) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {**pod("x")["spec"], "restartPolicy": "Never"}}},
    }
    # the Job controller would write the Job's status between the read and the replace: a
    # real API server then answers 409 (another revision) before it validates the change
    with sim_cluster.paused("jobs"):
        kube.batch.create_namespaced_job(kube.namespace, job, **STRICT)
        stored = kube.batch.read_namespaced_job("j", kube.namespace, _preload_content=False)
        current = json.loads(stored.data)
        current["spec"]["template"]["spec"]["activeDeadlineSeconds"] = 5
        code, status = refused(kube.batch.replace_namespaced_job, "j", kube.namespace, current)
    assert code == 422
    assert status["message"].startswith('Job.batch "j" is invalid: spec.template: Invalid value: ')
    assert status["message"].endswith(": field is immutable")


def test_a_job_whose_pods_restart_always_is_invalid(kube: KubeApis) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": pod("x")["spec"] | {"restartPolicy": "Always"}}},
    }
    _, status = refused(kube.batch.create_namespaced_job, kube.namespace, job)
    assert status["message"] == (
        'Job.batch "j" is invalid: spec.template.spec.restartPolicy: Unsupported value: '
        '"Always": supported values: "OnFailure", "Never"'
    )


def test_an_immutable_config_map_keeps_its_data_and_keys_are_checked(kube: KubeApis) -> None:
    config = {"metadata": {"name": "c"}, "data": {"a": "1"}, "immutable": True}
    kube.core.create_namespaced_config_map(kube.namespace, config, **STRICT)
    code, status = refused(
        kube.core.patch_namespaced_config_map, "c", kube.namespace, {"data": {"a": "2"}}
    )
    assert (code, status["message"]) == (
        422,
        'ConfigMap "c" is invalid: data: Forbidden: field is immutable when `immutable` is set',
    )
    _, status = refused(
        kube.core.create_namespaced_config_map,
        kube.namespace,
        {"metadata": {"name": "d"}, "data": {"a b": "1"}},
    )
    assert status["details"]["causes"][0]["field"] == "data[a b]"


def test_a_config_map_over_one_mebibyte_is_too_long(kube: KubeApis) -> None:
    big = {"metadata": {"name": "c"}, "data": {"a": "x" * (1024 * 1024 + 1)}}
    code, status = refused(kube.core.create_namespaced_config_map, kube.namespace, big)
    assert (code, status["message"]) == (
        422,
        'ConfigMap "c" is invalid: : Too long: may not be more than 1048576 bytes',
    )


def test_a_node_taint_of_an_unknown_effect_or_a_bad_label_is_invalid(kube: KubeApis) -> None:
    taint = {"spec": {"taints": [{"key": "simrun/reserved", "value": "r1", "effect": "Evict"}]}}
    code, status = refused(kube.core.patch_node, "node-1", taint)
    assert (code, status["message"]) == (
        422,
        'Node "node-1" is invalid: spec.taints[0].effect: Unsupported value: "Evict": '
        'supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"',
    )
    label = {"metadata": {"labels": {"simrun/reserved": "r 1"}}}
    _, status = refused(kube.core.patch_node, "node-1", label)
    assert status["message"].startswith('Node "node-1" is invalid: metadata.labels: ')


def test_a_replace_may_not_change_the_uid(kube: KubeApis) -> None:
    config = {"metadata": {"name": "c"}, "data": {"a": "1"}}
    kube.core.create_namespaced_config_map(kube.namespace, config, **STRICT)
    current = kube.core.read_namespaced_config_map("c", kube.namespace)
    current.metadata.uid = "another"
    _, status = refused(kube.core.replace_namespaced_config_map, "c", kube.namespace, current)
    assert status["message"] == (
        'ConfigMap "c" is invalid: metadata.uid: Invalid value: "another": field is immutable'
    )


def test_a_workflow_whose_pod_the_server_refuses_errors_with_its_message(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """Argo creates the pods: the server refuses one as any other, and Argo marks its node
    Error with the server's message."""
    template = worker_template()
    template["container"]["resources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}
    body = workflow("w", [task("a")], template)
    kube.custom.create_namespaced_custom_object(
        "argoproj.io", "v1alpha1", kube.namespace, "workflows", body, **STRICT
    )
    sim_cluster.wait_for_workflow("w", ("Error", "Failed"))
    nodes = (sim_cluster.workflow("w") or {})["status"]["nodes"]
    messages = [n.get("message", "") for n in nodes.values()]
    assert any("must be less than or equal to cpu limit of 1" in m for m in messages), messages

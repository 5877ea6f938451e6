"""The simulator's plain rules: expressions, patches, selectors, Argo's names."""

from __future__ import annotations

import pytest

from tests.sim.argo.expressions import ExprError, evaluate, evaluate_bool, nested
from tests.sim.argo.templates import build_pod, fnv32a, node_id, pod_name, substitute
from tests.sim.patches import PatchError, json_patch, merge_patch, strategic_merge
from tests.sim.resources import PODS
from tests.sim.selectors import field_matcher, label_matcher
from tests.sim.status import ApiError

RETRY_SCOPE = nested({"lastRetry.exitCode": "137", "retries": "1"})


def test_argo_expressions_compare_exit_codes_as_strings() -> None:
    """`"3" != 3` holds in expr, so the expression must quote the codes.

    The cluster side of M8 (docs/behaviours.md), as the simulator reproduces it.
    """
    assert evaluate_bool("lastRetry.exitCode != 137", RETRY_SCOPE)
    assert not evaluate_bool("lastRetry.exitCode != '137'", RETRY_SCOPE)
    assert evaluate_bool("lastRetry.exitCode != '3' and lastRetry.exitCode != '4'", RETRY_SCOPE)


def test_argo_expressions_choose_with_a_ternary() -> None:
    chosen = evaluate("lastRetry.exitCode == '137' ? '6Gi' : '3Gi'", RETRY_SCOPE)
    assert chosen == "6Gi"
    assert evaluate("asInt(retries) + 1", RETRY_SCOPE) == 2


def test_an_expression_over_an_unknown_name_is_an_error() -> None:
    with pytest.raises(ExprError):
        evaluate("missing == '1'", RETRY_SCOPE)


def test_substitution_leaves_what_the_scope_does_not_know() -> None:
    scope = {"inputs.parameters.worker": "scan-w1", "retries": "2"}
    template = {
        "env": [
            "{{inputs.parameters.worker}}",
            "{{ retries }}",
            "{{item}}",
            "{{=retries == '2' ? 'b' : 'a'}}",
            "{{=lastRetry.exitCode}}",
        ]
    }
    assert substitute(template, scope) == {
        "env": ["scan-w1", "2", "{{item}}", "b", "{{=lastRetry.exitCode}}"]
    }


def test_argo_names_nodes_and_pods_by_fnv_hashes() -> None:
    assert fnv32a("") == 0x811C9DC5
    assert node_id("wf", "wf") == "wf"
    assert node_id("wf", "wf.a(0)") == f"wf-{fnv32a('wf.a(0)')}"
    assert pod_name("wf", "wf.a(0)", "work") == f"wf-work-{fnv32a('wf.a(0)')}"


def test_a_pod_spec_patch_merges_the_main_container_by_name() -> None:
    """The patch is a strategic merge (containers and env by name), grace included.

    The cluster side of M9 (docs/behaviours.md), as the simulator reproduces it.
    """
    workflow = {
        "metadata": {"name": "wf", "namespace": "ns", "uid": "u"},
        "spec": {"serviceAccountName": "runner"},
    }
    template = {
        "name": "work",
        "container": {
            "image": "i",
            "command": ["simrun-worker"],
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            "resources": {"limits": {"memory": "1Gi", "cpu": "1"}},
        },
        "podSpecPatch": '{"terminationGracePeriodSeconds": 90, "containers": [{"name": "main",'
        ' "resources": {"limits": {"memory": "2Gi"}},'
        ' "env": [{"name": "B", "value": "3"}]}]}',
    }
    pod = build_pod(
        workflow,
        "wf.a",
        template,
        __import__("tests.sim.argo.templates", fromlist=["x"]).ExecutorConfig.from_configmap(),
    )
    main = pod["spec"]["containers"][1]
    assert main["command"] == ["/var/run/argo/argoexec", "emissary", "--", "simrun-worker"]
    assert main["resources"]["limits"] == {"memory": "2Gi", "cpu": "1"}
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert (env["A"], env["B"], env["ARGO_TERMINATION_GRACE_PERIOD_SECONDS"]) == ("1", "3", "90")
    assert pod["spec"]["serviceAccountName"] == "runner"


def test_a_merge_patch_deletes_with_null_and_replaces_lists() -> None:
    target = {"a": {"b": 1, "c": 2}, "l": [1, 2]}
    assert merge_patch(target, {"a": {"b": None}, "l": [3]}) == {"a": {"c": 2}, "l": [3]}


def test_a_json_patch_adds_replaces_and_tests() -> None:
    doc = {"spec": {"taints": [{"key": "a"}]}}
    patched = json_patch(
        doc,
        [
            {"op": "test", "path": "/spec/taints/0/key", "value": "a"},
            {"op": "add", "path": "/spec/taints/-", "value": {"key": "b"}},
            {"op": "replace", "path": "/spec/taints/0/key", "value": "c"},
        ],
    )
    assert patched == {"spec": {"taints": [{"key": "c"}, {"key": "b"}]}}
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "remove", "path": "/spec/nothing"}])


def test_a_strategic_merge_honours_keys_sets_and_directives() -> None:
    target = {
        "containers": [{"name": "main", "image": "a"}, {"name": "wait", "image": "w"}],
        "tolerations": [{"key": "x"}],
        "finalizers": ["f1"],
    }
    patch = {
        "containers": [{"name": "main", "image": "b"}, {"name": "wait", "$patch": "delete"}],
        "tolerations": [{"key": "y"}],
        "finalizers": ["f2"],
    }
    assert strategic_merge(target, patch) == {
        "containers": [{"name": "main", "image": "b"}],
        "tolerations": [{"key": "y"}],
        "finalizers": ["f1", "f2"],
    }
    assert strategic_merge({"m": {"a": 1}}, {"m": {"$patch": "replace", "b": 2}}) == {"m": {"b": 2}}


def test_label_selectors_take_the_kubernetes_syntax() -> None:
    obj = {"metadata": {"labels": {"tier": "x", "run": "r1"}}}
    assert label_matcher("tier=x,run in (r1, r2),!absent")(obj)
    assert not label_matcher("tier notin (x)")(obj)
    assert label_matcher("run")(obj) and not label_matcher("run!=r1")(obj)


def test_field_selectors_take_the_fields_the_type_indexes() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    assert field_matcher("spec.nodeName=n1,status.phase!=Failed", PODS)(pod)
    with pytest.raises(ApiError):
        field_matcher("spec.priority=1", PODS)

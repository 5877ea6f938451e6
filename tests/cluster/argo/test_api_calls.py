"""The Kubernetes API calls the backend makes are exactly those the service's RBAC grants.

A tour of every method of the backend against the simulator, whose access log records each
request as RBAC sees it; the distinct calls are tests/deploy/argo_api_calls.txt, which
tests/deploy/test_rbac.py compares with deploy/cluster/service/rbac.yaml. Every other test of
this suite checks that it made no call outside that file (conftest.py).
SIMRUN_UPDATE_GOLDEN=1 rewrites the file from the tour.
"""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from runs.ports import PodPhase
from tests.cluster.argo.builders import command_task, launch, split_task, write_task
from tests.cluster.argo.golden import updating
from tests.cluster.argo.lab import API_CALLS, Lab, allowed_calls, calls_made
from tests.deploy.api_rights import calls_from_access_log, format_calls
from tests.waiting import wait_for

HEADER = """\
# The Kubernetes API calls the Argo backend makes, one per line: verb, resource (with its
# subresource after a slash), namespace ('*' for all namespaces, '-' for a cluster-scoped
# resource). The service's RBAC (deploy/cluster/service/rbac.yaml) must allow each of them and
# nothing else (tests/deploy/test_rbac.py).
#
# Generated from the cluster simulator's access log by a tour of every method of the backend:
#   SIMRUN_UPDATE_GOLDEN=1 pytest tests/cluster/argo/test_api_calls.py
# Every other test of tests/cluster/argo checks that it made no call outside this list.
"""


def tour(lab: Lab) -> None:
    """Every method of the backend, every path that calls the API."""
    sim = lab.sim
    assert sim is not None
    backend = lab.backend
    backend.nodes()
    backend.reserve("node-1", "r1")
    backend.unreserve("node-1", "r1")
    woken: list[int] = []
    backend.subscribe(lambda: woken.append(1))
    write_task(lab.store, "r1", "scan", "sleep", units=2, seconds=0.1)
    with sim.paused("kueue"):
        name = backend.submit(launch("r1", split_task("scan", 2)))
        wait_for(lambda: lab.pod(name, "scan-w1"), what="gated pods")
        backend.placements()
        backend.logs(name, "scan")
        backend.stop(name)
        backend.cancel(name)
    other = backend.submit(launch("r2", command_task("t", "print('hi')")))
    wait_for(lambda: backend.status(other).pods["t"].phase is PodPhase.SUCCEEDED, timeout=60)
    backend.logs(other, "t")
    backend.statuses([name, other])
    wait_for(lambda: woken, what="a wake")
    backend.has_image("ab" * 32)
    backend.build_image({"pyproject.toml": b"[project]\n"}, "ab" * 32)
    sim.buildkit.fail_next()
    with pytest.raises(RuntimeError):
        backend.build_image({"pyproject.toml": b"[project]\n"}, "cd" * 32)
    question = {"op": "identify", "type": "sleep"}
    assert backend.ask_plugin_host("ab" * 32, [question], timeout_s=60, memory_mb=256)
    backend.close()


def test_the_backend_makes_exactly_the_calls_the_service_may_make(sim_lab: Lab) -> None:
    """The calls of the tour are the list RBAC is checked against."""
    tour(sim_lab)
    assert sim_lab.sim is not None
    if updating():
        API_CALLS.write_text(HEADER + format_calls(calls_from_access_log(sim_lab.sim.access_log)))
    assert calls_made(sim_lab.sim) == allowed_calls()


def test_every_write_of_the_backend_asks_for_strict_field_validation(sim_lab: Lab) -> None:
    """Each create, replace and patch of the tour asks `fieldValidation=Strict`, so a real
    API server refuses an unknown field as the simulator does, rather than dropping it with
    a warning (its default)."""
    tour(sim_lab)
    assert sim_lab.sim is not None
    writes = [r for r in sim_lab.sim.access_log if r.verb in ("create", "update", "patch")]
    kinds = {(r.verb, r.resource) for r in writes}
    assert {("create", "workflows"), ("patch", "workflows"), ("patch", "nodes")} <= kinds
    assert {("create", "jobs"), ("create", "configmaps")} <= kinds
    assert {(r.verb, r.resource, r.field_validation) for r in writes} == {
        (verb, resource, "Strict") for verb, resource in kinds
    }


def test_a_workflow_with_an_unknown_field_is_refused_and_not_created(
    sim_lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manifest with a field Argo does not know (a typo) fails the submission with the
    server's answer, instead of running without that field."""
    from cluster.argo import backend as module

    made = module.workflow_manifest

    def misspelt(*args: object, **kwargs: object) -> dict[str, object]:
        manifest = made(*args, **kwargs)  # type: ignore[arg-type]
        manifest["spec"]["podPriorityClass"] = "simrun-person"
        return manifest

    monkeypatch.setattr(module, "workflow_manifest", misspelt)
    with pytest.raises(ApiException) as refused:
        sim_lab.backend.submit(launch("r1", command_task("t", "pass")))
    assert refused.value.status == 400
    message = json.loads(refused.value.body)["message"]
    assert message.endswith('strict decoding error: unknown field "spec.podPriorityClass"')
    assert sim_lab.workflow("simrun-r1") is None

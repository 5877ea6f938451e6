"""The service's RBAC allows exactly the API calls the Argo backend makes.

The calls are tests/deploy/argo_api_calls.txt: provisional until the Argo backend exists;
then it is regenerated from the cluster simulator's access log (see that file's header).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from tests.deploy.api_rights import (
    ALL_NAMESPACES,
    CLUSTER,
    Call,
    calls_from_access_log,
    format_calls,
    grants_of,
    needed,
    read_calls,
    read_calls_text,
)
from tests.deploy.manifests import NAMESPACE, Obj

CALLS = read_calls(Path(__file__).resolve().parent / "argo_api_calls.txt")


def test_the_list_of_calls_is_not_empty_and_names_known_scopes() -> None:
    assert len(CALLS) >= 10
    assert {c.namespace for c in CALLS} <= {NAMESPACE, ALL_NAMESPACES, CLUSTER}


def test_the_service_may_make_every_call_of_the_backend(cluster_objects: list[Obj]) -> None:
    grants = grants_of(cluster_objects, NAMESPACE, "simrun")
    refused = [str(c) for c in CALLS if not any(g.allows(c) for g in grants)]
    assert refused == []


def test_the_service_may_do_nothing_the_backend_does_not(cluster_objects: list[Obj]) -> None:
    grants = grants_of(cluster_objects, NAMESPACE, "simrun")
    assert grants
    assert [str(g) for g in grants if not needed(g, CALLS)] == []


def test_no_rule_uses_a_wildcard(cluster_objects: list[Obj]) -> None:
    grants = grants_of(cluster_objects, NAMESPACE, "simrun")
    assert [str(g) for g in grants if "*" in (g.verb, g.group, g.resource)] == []


def test_the_only_secret_the_service_reads_is_the_registry_auth(cluster_objects: list[Obj]) -> None:
    grants = grants_of(cluster_objects, NAMESPACE, "simrun")
    secrets = [g for g in grants if g.resource == "secrets"]
    assert secrets
    assert {g.resource_names for g in secrets} == {("simrun-registry-auth",)}


def test_the_comparison_would_catch_a_missing_or_an_extra_right(
    cluster_objects: list[Obj],
) -> None:
    grants = grants_of(cluster_objects, NAMESPACE, "simrun")
    unused = Call("deletecollection", "", "pods", NAMESPACE)
    assert not any(g.allows(unused) for g in grants)
    without_watch = [c for c in CALLS if c.verb != "watch"]
    assert [str(g) for g in grants if not needed(g, without_watch)] == [
        "watch argoproj.io/workflows in simrun"
    ]


def test_a_simulator_access_log_becomes_the_lines_of_the_calls_file() -> None:
    class Record(NamedTuple):
        verb: str
        group: str
        resource: str
        namespace: str | None
        subresource: str | None
        name: str | None

    log = [
        Record("get", "", "pods", "simrun", "log", "w0"),
        Record("list", "", "pods", None, None, None),
        Record("patch", "", "nodes", None, None, "n1"),
        Record("get", "", "pods", "simrun", "log", "w1"),
        Record("watch", "argoproj.io", "workflows", "simrun", None, None),
    ]
    assert format_calls(calls_from_access_log(log)) == (
        "patch nodes -\nlist pods *\nget pods/log simrun\nwatch workflows simrun\n"
    )
    assert set(read_calls_text(format_calls(calls_from_access_log(log)))) == set(
        calls_from_access_log(log)
    )

"""What an account may do by RBAC, and which API calls that allows: the model test_rbac uses.

A call is (verb, group, resource, namespace) where the resource may carry a subresource
(`pods/log`) and the namespace is a name, ALL_NAMESPACES or CLUSTER (a cluster-scoped
resource). A grant is the same with the scope it comes from: a RoleBinding grants within its
namespace; a ClusterRoleBinding grants in every namespace and on cluster-scoped resources.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tests.deploy.manifests import Obj, find

ALL_NAMESPACES = "*"
CLUSTER = "-"

GROUPS = {"workflows": "argoproj.io", "jobs": "batch"}
"""The API group of each resource the backend names that is not in the core group."""


@dataclass(frozen=True)
class Call:
    verb: str
    group: str
    resource: str
    namespace: str

    def __str__(self) -> str:
        group = f"{self.group}/" if self.group else ""
        return f"{self.verb} {group}{self.resource} in {self.namespace}"


@dataclass(frozen=True)
class Grant:
    verb: str
    group: str
    resource: str
    scope: str  # a namespace, or CLUSTER for a ClusterRoleBinding
    resource_names: tuple[str, ...]

    def allows(self, call: Call) -> bool:
        same = (self.verb, self.group, self.resource) == (call.verb, call.group, call.resource)
        return same and (self.scope == CLUSTER or self.scope == call.namespace)

    def __str__(self) -> str:
        group = f"{self.group}/" if self.group else ""
        where = "cluster-wide" if self.scope == CLUSTER else f"in {self.scope}"
        return f"{self.verb} {group}{self.resource} {where}"


def read_calls(path: Path) -> list[Call]:
    """The calls of a file of lines `verb resource[/subresource] namespace` (# comments)."""
    return read_calls_text(path.read_text())


def read_calls_text(text: str) -> list[Call]:
    """The calls of lines `verb resource[/subresource] namespace` (# starts a comment)."""
    calls = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        verb, resource, namespace = line.split()
        calls.append(Call(verb, GROUPS.get(resource.split("/")[0], ""), resource, namespace))
    return calls


def grants_of(objects: list[Obj], namespace: str, account: str) -> list[Grant]:
    """Everything the ServiceAccount `namespace/account` may do by the bindings among objects."""
    grants: list[Grant] = []
    for binding in objects:
        if binding["kind"] not in {"RoleBinding", "ClusterRoleBinding"}:
            continue
        subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
        if subject not in binding.get("subjects", []):
            continue
        role = find(objects, binding["roleRef"]["kind"], binding["roleRef"]["name"])
        scope = (
            CLUSTER if binding["kind"] == "ClusterRoleBinding" else binding["metadata"]["namespace"]
        )
        for rule in role.get("rules", []):
            names = tuple(rule.get("resourceNames", ()))
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        grants.append(Grant(verb, group, resource, scope, names))
    return grants


def needed(grant: Grant, calls: list[Call]) -> bool:
    """Whether some call needs this grant: a cluster-wide grant is needed only by a call across
    all namespaces or on a cluster-scoped resource; within one namespace a Role would do."""
    for call in calls:
        if not grant.allows(call):
            continue
        if grant.scope != CLUSTER or call.namespace in {ALL_NAMESPACES, CLUSTER}:
            return True
    return False


class AccessRecord(Protocol):
    """One entry of the cluster simulator's access log (tests/sim/apiserver.py)."""

    @property
    def verb(self) -> str: ...
    @property
    def group(self) -> str: ...
    @property
    def resource(self) -> str: ...
    @property
    def namespace(self) -> str | None: ...
    @property
    def subresource(self) -> str | None: ...


def calls_from_access_log(
    records: Iterable[AccessRecord], cluster_scoped: Iterable[str] = ("nodes", "namespaces")
) -> list[Call]:
    """The distinct calls of an access log, in the order they first occur.

    The log has no namespace both for a cluster-scoped resource and for a call across all
    namespaces; `cluster_scoped` names the resources of the first kind.
    """
    scoped = set(cluster_scoped)
    calls: dict[Call, None] = {}
    for r in records:
        namespace = r.namespace or (CLUSTER if r.resource in scoped else ALL_NAMESPACES)
        resource = f"{r.resource}/{r.subresource}" if r.subresource else r.resource
        calls[Call(r.verb, r.group, resource, namespace)] = None
    return list(calls)


def format_calls(calls: Iterable[Call]) -> str:
    """Lines for argo_api_calls.txt (after its header), sorted by resource and verb."""
    ordered = sorted(calls, key=lambda c: (c.resource, c.namespace, c.verb))
    return "".join(f"{c.verb} {c.resource} {c.namespace}\n" for c in ordered)

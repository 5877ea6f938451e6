"""The resources the simulated API server serves, with what the real one knows of each.

Group, version, kind, whether it is namespaced, whether it is a custom resource (no strategic
merge patch, list items carry their kind), its subresources and the field labels its field
selectors accept (`metadata.name` and `metadata.namespace` always; the rest per type, as in
`pkg/registry/*/strategy.go` of Kubernetes: e.g. pods add `spec.nodeName` and `status.phase`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ResourceInfo:
    """One resource type of the API."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    custom: bool = False
    subresources: frozenset[str] = field(default_factory=frozenset)
    field_labels: frozenset[str] = field(default_factory=frozenset)

    @property
    def api_version(self) -> str:
        """`v1` for the core group, else `<group>/<version>`."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """The name in messages: `pods`, `jobs.batch`, `workflows.argoproj.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def key(self) -> tuple[str, str]:
        """(group, plural): how the store files the objects of this type."""
        return (self.group, self.plural)


_POD_FIELDS = frozenset(
    {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
)
_EVENT_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)

_ALL = [
    ResourceInfo(
        "",
        "v1",
        "pods",
        "Pod",
        subresources=frozenset({"log", "status", "eviction"}),
        field_labels=_POD_FIELDS,
    ),
    ResourceInfo(
        "",
        "v1",
        "nodes",
        "Node",
        namespaced=False,
        subresources=frozenset({"status"}),
        field_labels=frozenset({"spec.unschedulable"}),
    ),
    ResourceInfo("", "v1", "namespaces", "Namespace", namespaced=False),
    ResourceInfo("", "v1", "configmaps", "ConfigMap"),
    ResourceInfo("", "v1", "secrets", "Secret", field_labels=frozenset({"type"})),
    ResourceInfo("", "v1", "serviceaccounts", "ServiceAccount"),
    ResourceInfo("", "v1", "events", "Event", field_labels=_EVENT_FIELDS),
    ResourceInfo(
        "batch",
        "v1",
        "jobs",
        "Job",
        subresources=frozenset({"status"}),
        field_labels=frozenset({"status.successful"}),
    ),
    ResourceInfo("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False),
    ResourceInfo("argoproj.io", "v1alpha1", "workflows", "Workflow", custom=True),
    ResourceInfo(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        "ClusterQueue",
        namespaced=False,
        custom=True,
        subresources=frozenset({"status"}),
    ),
    ResourceInfo(
        "kueue.x-k8s.io",
        "v1beta2",
        "localqueues",
        "LocalQueue",
        custom=True,
        subresources=frozenset({"status"}),
    ),
    ResourceInfo(
        "kueue.x-k8s.io",
        "v1beta2",
        "resourceflavors",
        "ResourceFlavor",
        namespaced=False,
        custom=True,
    ),
    ResourceInfo(
        "kueue.x-k8s.io",
        "v1beta2",
        "workloads",
        "Workload",
        custom=True,
        subresources=frozenset({"status"}),
    ),
    ResourceInfo(
        "kueue.x-k8s.io",
        "v1beta2",
        "workloadpriorityclasses",
        "WorkloadPriorityClass",
        namespaced=False,
        custom=True,
    ),
]

_BY_KEY = {(info.group, info.version, info.plural): info for info in _ALL}

PODS = _BY_KEY["", "v1", "pods"]
NODES = _BY_KEY["", "v1", "nodes"]
NAMESPACES = _BY_KEY["", "v1", "namespaces"]
CONFIGMAPS = _BY_KEY["", "v1", "configmaps"]
SECRETS = _BY_KEY["", "v1", "secrets"]
SERVICE_ACCOUNTS = _BY_KEY["", "v1", "serviceaccounts"]
EVENTS = _BY_KEY["", "v1", "events"]
JOBS = _BY_KEY["batch", "v1", "jobs"]
PRIORITY_CLASSES = _BY_KEY["scheduling.k8s.io", "v1", "priorityclasses"]
WORKFLOWS = _BY_KEY["argoproj.io", "v1alpha1", "workflows"]
CLUSTER_QUEUES = _BY_KEY["kueue.x-k8s.io", "v1beta2", "clusterqueues"]
LOCAL_QUEUES = _BY_KEY["kueue.x-k8s.io", "v1beta2", "localqueues"]
RESOURCE_FLAVORS = _BY_KEY["kueue.x-k8s.io", "v1beta2", "resourceflavors"]
WORKLOAD_PRIORITY_CLASSES = _BY_KEY["kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses"]
WORKLOADS = _BY_KEY["kueue.x-k8s.io", "v1beta2", "workloads"]


def lookup(group: str, version: str, plural: str) -> ResourceInfo | None:
    """The resource served at `/apis/<group>/<version>/<plural>` (core: group "")."""
    return _BY_KEY.get((group, version, plural))


def all_resources() -> list[ResourceInfo]:
    """Every resource type the simulator serves."""
    return list(_ALL)

"""What the API server does to a pod before storing it: defaults and priority admission.

- Defaults (`pkg/apis/core/v1/defaults.go`): `restartPolicy: Always`,
  `terminationGracePeriodSeconds: 30`, `schedulerName: default-scheduler`, a container's
  limits copied into its missing requests, status `Pending` with its QoS class.
- Priority admission (`plugin/pkg/admission/priority`): `spec.priority` from the
  PriorityClass named by `priorityClassName` (403 Forbidden when there is none), else from the
  class marked `globalDefault`, else 0.

- Default tolerations (`plugin/pkg/admission/defaulttolerationseconds`): a pod that does
  not tolerate the NoExecute taints `node.kubernetes.io/not-ready` and
  `node.kubernetes.io/unreachable` gets a toleration of each (`Exists`) for
  DEFAULT_TOLERATION_SECONDS (300): on a lost node it stays 5 minutes before it is evicted.

- ServiceAccount admission (`plugin/pkg/admission/serviceaccount`): a pod runs as the
  account its `serviceAccountName` names (`default`, which every namespace has, when it names
  none); one that does not exist in the pod's namespace is refused, 403 `pods "x" is
  forbidden: error looking up service account <ns>/<name>: serviceaccount "<name>" not
  found`.

Kueue's mutating webhook (the scheduling gates) is registered by `tests.sim.kueue`.
"""

from __future__ import annotations

from typing import Any

from tests.sim import status
from tests.sim.nodes import NOT_READY, UNREACHABLE
from tests.sim.resources import PODS, PRIORITY_CLASSES, SERVICE_ACCOUNTS, ResourceInfo
from tests.sim.scheduling import tolerates
from tests.sim.store import Obj, Store


def _qos(containers: list[dict[str, Any]]) -> str:
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        all(
            (r.get("limits") or {}).get(name) is not None
            and (r.get("requests") or {}).get(name) == (r.get("limits") or {}).get(name)
            for name in ("cpu", "memory")
        )
        for r in resources
    )
    return "Guaranteed" if guaranteed else "Burstable"


def pod_defaults(info: ResourceInfo, pod: Obj) -> None:
    """Fill the fields the API server defaults on a new pod."""
    if info is not PODS:
        return
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    for container in containers:
        resources = container.setdefault("resources", {})
        limits = resources.get("limits") or {}
        if limits:
            resources["requests"] = {**limits, **(resources.get("requests") or {})}
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("imagePullPolicy", "IfNotPresent")
    pod["status"] = {"phase": "Pending", "qosClass": _qos(spec.get("containers") or [])}


DEFAULT_TOLERATION_SECONDS = 300
"""The API server's `--default-not-ready-toleration-seconds` and `-unreachable-` (300)."""


def default_tolerations(info: ResourceInfo, pod: Obj) -> None:
    """Tolerate not-ready and unreachable nodes for 300 s unless the pod says otherwise."""
    if info is not PODS:
        return
    tolerations = pod.setdefault("spec", {}).setdefault("tolerations", [])
    for key in (NOT_READY, UNREACHABLE):
        taint = {"key": key, "effect": "NoExecute"}
        if not any(tolerates(t, taint) for t in tolerations):
            tolerations.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }
            )


def priority_admission(store: Store) -> Any:
    """The admission hook that resolves a pod's priority from the PriorityClasses."""

    def admit(info: ResourceInfo, pod: Obj) -> None:
        if info is not PODS:
            return
        spec = pod.setdefault("spec", {})
        name = spec.get("priorityClassName")
        if name:
            found = store.find(PRIORITY_CLASSES, "", name)
            if found is None:
                raise status.forbidden(
                    PODS, pod["metadata"]["name"], f"no PriorityClass with name {name} was found"
                )
            spec["priority"] = int(found.get("value", 0))
            return
        classes, _ = store.objects(PRIORITY_CLASSES)
        default = next((c for c in classes if c.get("globalDefault")), None)
        if default is not None:
            spec["priorityClassName"] = default["metadata"]["name"]
        spec["priority"] = int(default.get("value", 0)) if default else 0

    return admit


def service_account_admission(store: Store) -> Any:
    """The admission hook that refuses a pod of an account its namespace does not have."""

    def admit(info: ResourceInfo, pod: Obj) -> None:
        if info is not PODS:
            return
        metadata = pod["metadata"]
        account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        namespace = metadata.get("namespace", "")
        # `default` exists in every namespace (the service account controller makes it)
        if account != "default" and store.find(SERVICE_ACCOUNTS, namespace, account) is None:
            raise status.forbidden(
                PODS,
                metadata["name"],
                f"error looking up service account {namespace}/{account}: "
                f'serviceaccount "{account}" not found',
            )

    return admit

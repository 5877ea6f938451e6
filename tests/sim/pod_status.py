"""What the simulated kubelet reports of a pod: its container statuses, phase and conditions.

A running pod is Running with `hostIP`/`podIP` 127.0.0.1 and the conditions Initialized,
Ready and ContainersReady (PodScheduled and others kept as they were; a condition's
`lastTransitionTime` moves only when its status does); its init containers (the executor's
init) Completed; each container running or terminated {exitCode, reason, startedAt,
finishedAt}. Once every container ended the pod is Succeeded (all 0) or Failed, its
conditions with reason `PodCompleted`. A pod whose node came back after it was lost (`lost`)
reports its containers terminated `ContainerStatusUnknown` (137) and fails.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tests.sim.containers import Container
from tests.sim.store import Obj


def container_status(
    spec: dict[str, Any], container: Container | None, state: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A container's status: `state` as given, else its container's running or terminated."""
    if state is None and container is not None:
        if container.running:
            state = {"running": {"startedAt": container.started_at}}
        else:
            terminated = {
                "exitCode": container.exit_code,
                "reason": container.reason,
                "startedAt": container.started_at,
                "finishedAt": container.finished_at,
            }
            if container.message:
                terminated["message"] = container.message
            state = {"terminated": terminated}
    running = container is not None and container.running
    return {
        "name": spec["name"],
        "image": spec.get("image", ""),
        "imageID": "",
        "containerID": f"sim://{spec['name']}",
        "ready": running,
        "started": running,
        "restartCount": 0,
        "state": state or {},
    }


def reported(
    pod: Obj, containers: Mapping[str, Container], started_at: str, stamp: str
) -> Callable[[Obj], None]:
    """The change that writes a pod's status as its kubelet reports it at `stamp`, from its
    `containers` (by name) started at `started_at`."""
    spec = pod.get("spec") or {}
    statuses = [
        container_status(c, containers.get(c["name"])) for c in spec.get("containers") or []
    ]
    init = [
        {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": "",
            "ready": True,
            "restartCount": 0,
            "state": {
                "terminated": {
                    "exitCode": 0,
                    "reason": "Completed",
                    "startedAt": started_at,
                    "finishedAt": started_at,
                }
            },
        }
        for c in spec.get("initContainers") or []
    ]
    done = all(not c.running for c in containers.values())
    failed = any(c.exit_code for c in containers.values())
    phase = ("Failed" if failed else "Succeeded") if done else "Running"
    ready = "False" if done else "True"

    def apply(o: Obj) -> None:
        current = o["status"]
        scheduled = [c for c in current.get("conditions") or [] if c["type"] == "PodScheduled"]
        previous = {c["type"]: c for c in current.get("conditions") or []}
        conditions = [
            *scheduled,
            *(
                {
                    "type": kind,
                    "status": value,
                    "lastTransitionTime": previous[kind]["lastTransitionTime"]
                    if previous.get(kind, {}).get("status") == value
                    else stamp,
                    **({"reason": "PodCompleted"} if done and kind != "Initialized" else {}),
                }
                for kind, value in (
                    ("Initialized", "True"),
                    ("Ready", ready),
                    ("ContainersReady", ready),
                )
            ),
        ]
        extra = [
            c
            for c in current.get("conditions") or []
            if c["type"] not in ("PodScheduled", "Initialized", "Ready", "ContainersReady")
        ]
        current.update(
            phase=phase,
            hostIP="127.0.0.1",
            podIP="127.0.0.1",
            podIPs=[{"ip": "127.0.0.1"}],
            startTime=started_at,
            conditions=conditions + extra,
            containerStatuses=statuses,
        )
        if init:
            current["initContainerStatuses"] = init

    return apply


def lost(pod: Obj) -> None:
    """A pod whose containers died with its node, as the kubelet back reports it: Failed,
    each container terminated `ContainerStatusUnknown` with exit code 137."""
    status = pod["status"]
    for container in status.get("containerStatuses") or []:
        started = ((container.get("state") or {}).get("running") or {}).get("startedAt")
        container.update(ready=False, started=False)
        container["state"] = {
            "terminated": {
                "exitCode": 137,
                "reason": "ContainerStatusUnknown",
                "message": "The container could not be located when the pod was terminated",
                **({"startedAt": started} if started else {}),
            }
        }
    status["phase"] = "Failed"

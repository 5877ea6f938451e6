"""Events (core v1) the simulated controllers write about what they did.

The scheduler (`Scheduled`, `FailedScheduling`), Kueue (`Started`, `Preempted`) and the
taint manager (`TaintManagerEviction`) report through `record_event`, as a real
component's event recorder does: one Event per call, named after the object it is about.
"""

from __future__ import annotations

import uuid

from tests.sim.resources import EVENTS
from tests.sim.store import Obj, Store, meta


def record_event(
    store: Store,
    involved: Obj,
    reason: str,
    message: str,
    kind: str = "Normal",
    component: str = "sim",
) -> None:
    """Write a core v1 Event about an object, as controllers report what they did."""
    m = meta(involved)
    namespace = m.get("namespace") or "default"
    now = store.clock.stamp()
    event = {
        "metadata": {"name": f"{m['name']}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "involvedObject": {
            "kind": involved.get("kind"),
            "apiVersion": involved.get("apiVersion"),
            "name": m["name"],
            "namespace": m.get("namespace"),
            "uid": m.get("uid"),
        },
        "reason": reason,
        "message": message,
        "type": kind,
        "count": 1,
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
    }
    store.create(EVENTS, namespace, event)

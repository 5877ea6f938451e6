"""The simulated etcd and registry: objects, one global resourceVersion, history, deletion.

Every write takes the next resourceVersion of one counter shared by all types (as etcd's
revision is), stores a new object (stored objects are never changed in place, so readers may
hold them without copies) and appends a change to the history that watches replay from
(`tests.sim.history`). Writes are decoded as `fieldValidation` asks (`tests.sim.decoding`).

Deletion follows the registry: an object with finalizers, or a pod bound to a node that has
not ended, gets `deletionTimestamp` and stays until its finalizers are gone and (for a pod)
the kubelet confirmed with a zero grace; then it is removed and its dependents (by
`ownerReferences`) are deleted in the background, or orphaned when asked to (batch/v1 Jobs
orphan by default, `DefaultGarbageCollectionPolicy` of pkg/registry/batch/job/strategy.go).
"""

from __future__ import annotations

import copy
import secrets
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from tests.sim import status
from tests.sim.clock import SimClock, timestamp
from tests.sim.decoding import STRICT, decode
from tests.sim.history import Change, History
from tests.sim.resources import JOBS, PODS, ResourceInfo, all_resources
from tests.sim.selectors import Matcher
from tests.sim.validation import problems_of_new, problems_of_update

Obj = dict[str, Any]
Admission = Callable[[ResourceInfo, Obj], None]
# Types whose status is written only through the status subresource.
_STATUS_SUBRESOURCE = {r.key for r in all_resources() if "status" in r.subresources}


def meta(obj: Obj) -> dict[str, Any]:
    """The metadata of an object (created when absent)."""
    return obj.setdefault("metadata", {})


class Store:
    """Objects of every type, guarded by one lock."""

    def __init__(self, clock: SimClock, history_limit: int = 20_000) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)
        self._objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = defaultdict(dict)
        self._rv = 1
        self._history = History(history_limit)
        self.admission: list[Admission] = []
        self.strict = True
        """Refuse unknown and mistyped fields of every create, replace and patch."""
        self.closed = False
        clock.on_advance(self.poke)

    # -- reading -------------------------------------------------------------------------

    @property
    def rv(self) -> int:
        """The resourceVersion of the last write."""
        return self._rv

    def find(self, info: ResourceInfo, namespace: str, name: str) -> Obj | None:
        """The stored object, None when it does not exist (do not change it)."""
        return self._objects[info.key].get((namespace if info.namespaced else "", name))

    def get(self, info: ResourceInfo, namespace: str, name: str) -> Obj:
        """The stored object; 404 when it does not exist."""
        obj = self.find(info, namespace, name)
        if obj is None:
            raise status.not_found(info, name)
        return obj

    def objects(
        self, info: ResourceInfo, namespace: str | None = None, match: Matcher | None = None
    ) -> tuple[list[Obj], int]:
        """Objects of a type (in a namespace, matching a predicate) and the list's version."""
        with self.lock:
            items = [
                obj
                for (ns, _), obj in sorted(self._objects[info.key].items())
                if (namespace is None or ns == namespace) and (match is None or match(obj))
            ]
            return items, self._rv

    # -- writing -------------------------------------------------------------------------

    def check_fields(
        self,
        info: ResourceInfo,
        obj: Obj,
        patch: str | None = None,
        *,
        validation: str = STRICT,
        warnings: list[str] | None = None,
    ) -> None:
        """Decode an object as `fieldValidation` asks (`decoding.decode`), unless the store
        is not `strict`."""
        if self.strict:
            decode(info, obj, patch, validation=validation, warnings=warnings)

    def _write(self, info: ResourceInfo, obj: Obj, kind: str, old: Obj | None) -> Obj:
        self._rv += 1
        meta(obj)["resourceVersion"] = str(self._rv)
        key = (meta(obj).get("namespace", "") if info.namespaced else "", meta(obj)["name"])
        if kind == "DELETED":
            self._objects[info.key].pop(key, None)
        else:
            self._objects[info.key][key] = obj
        self._history.append(Change(self._rv, kind, info, obj, old))
        self._changed.notify_all()
        return obj

    def create(
        self,
        info: ResourceInfo,
        namespace: str,
        obj: Obj,
        *,
        validation: str = STRICT,
        warnings: list[str] | None = None,
    ) -> Obj:
        """Store a new object: decoded (`check_fields`), admitted (the hooks), validated
        (`validation.problems_of_new`, 422 Invalid), then stored; 409 AlreadyExists for a
        taken name."""
        with self.lock:
            obj = copy.deepcopy(obj)
            metadata = meta(obj)
            if not metadata.get("name") and metadata.get("generateName"):
                metadata["name"] = metadata["generateName"] + secrets.token_hex(3)[:5]
            name = metadata.get("name") or ""
            if not name:
                raise status.invalid(
                    info, "", "metadata.name: Required value: name or generateName is required"
                )
            if info.namespaced:
                if metadata.get("namespace", namespace) != namespace:
                    raise status.bad_request(
                        "the namespace of the provided object does not match the namespace "
                        "sent on the request"
                    )
                metadata["namespace"] = namespace
            else:
                metadata.pop("namespace", None)
            obj["apiVersion"], obj["kind"] = info.api_version, info.kind
            self.check_fields(info, obj, validation=validation, warnings=warnings)
            for hook in self.admission:
                hook(info, obj)
            problems = problems_of_new(info, obj)
            if problems:
                raise status.invalid_object(info, name, problems)
            if self.find(info, namespace, name) is not None:
                raise status.already_exists(info, name)
            metadata["uid"] = str(uuid.uuid4())
            metadata["creationTimestamp"] = self.clock.stamp()
            if info.custom or info is JOBS:
                metadata["generation"] = 1
            for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
                metadata.pop(key, None)
            return self._write(info, obj, "ADDED", None)

    def _check_version(self, info: ResourceInfo, name: str, current: Obj, given: Obj) -> None:
        wanted = meta(given).get("resourceVersion")
        if wanted and wanted != meta(current)["resourceVersion"]:
            raise status.conflict(info, name)

    def _store_update(self, info: ResourceInfo, current: Obj, new: Obj, sub: str | None) -> Obj:
        """Write `new` over `current`, keeping what a client cannot change."""
        if sub == "status":  # only the status changes; the rest is the stored object's
            new = {**current, "metadata": copy.deepcopy(meta(current)), "status": new.get("status")}
        elif info.key in _STATUS_SUBRESOURCE and "status" in current:
            new = {**new, "status": current["status"]}
        metadata = meta(new)
        for key in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
            "name",
        ):
            if key in meta(current):
                metadata[key] = meta(current)[key]
            else:
                metadata.pop(key, None)
        if "generation" in metadata and new.get("spec") != current.get("spec"):
            metadata["generation"] += 1
        new["apiVersion"], new["kind"] = info.api_version, info.kind
        metadata["resourceVersion"] = meta(current)["resourceVersion"]
        if new == current:
            return current  # a no-op write keeps its version, as etcd skips it
        written = self._write(info, new, "MODIFIED", current)
        self._finish_if_released(info, written)
        return written

    def replace(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        obj: Obj,
        sub: str | None = None,
        *,
        validation: str = STRICT,
        warnings: list[str] | None = None,
    ) -> Obj:
        """PUT: replace an object; 409 when its resourceVersion is not the stored one."""
        with self.lock:
            current = self.get(info, namespace, name)
            given = {**copy.deepcopy(obj), "apiVersion": info.api_version, "kind": info.kind}
            if meta(given).get("name", name) != name:
                raise status.bad_request(
                    "the name of the object does not match the name on the URL"
                )
            self._check_version(info, name, current, given)
            self.check_fields(info, given, validation=validation, warnings=warnings)
            self._validate_update(info, name, current, given, sub)
            return self._store_update(info, current, given, sub)

    def _validate_update(
        self, info: ResourceInfo, name: str, current: Obj, new: Obj, sub: str | None
    ) -> None:
        """422 Invalid for an update the server refuses (a client's; not of a status)."""
        if sub is None:
            problems = problems_of_update(info, current, new)
            if problems:
                raise status.invalid_object(info, name, problems)

    def apply_update(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        change: Callable[[Obj], Obj],
        sub: str | None = None,
        patch: str = "",
        *,
        validation: str = STRICT,
        warnings: list[str] | None = None,
    ) -> Obj:
        """PATCH: `change` computes the new object from a copy of the stored one."""
        with self.lock:
            current = self.get(info, namespace, name)
            new = {**change(copy.deepcopy(current)), "apiVersion": info.api_version}
            new["kind"] = info.kind
            self._check_version(info, name, current, new)
            self.check_fields(info, new, patch, validation=validation, warnings=warnings)
            self._validate_update(info, name, current, new, sub)
            return self._store_update(info, current, new, sub)

    def modify(
        self, info: ResourceInfo, namespace: str, name: str, change: Callable[[Obj], object]
    ) -> Obj | None:
        """The controllers' atomic read-modify-write; no write when nothing changed."""
        with self.lock:
            current = self.find(info, namespace, name)
            if current is None:
                return None
            new = copy.deepcopy(current)
            change(new)
            if new == current:
                return current
            written = self._write(info, new, "MODIFIED", current)
            self._finish_if_released(info, written)
            return written

    # -- deleting ------------------------------------------------------------------------

    def delete(
        self,
        info: ResourceInfo,
        namespace: str,
        name: str,
        grace: int | None = None,
        propagation: str | None = None,
        preconditions: dict[str, Any] | None = None,
    ) -> tuple[Obj, bool]:
        """Delete as the registry does; returns the object and whether it is gone now."""
        with self.lock:
            obj = self.get(info, namespace, name)
            for field in ("uid", "resourceVersion"):
                wanted = (preconditions or {}).get(field)
                if wanted and wanted != meta(obj).get(field):
                    raise status.conflict(
                        info,
                        name,
                        f"Precondition failed: {field} in precondition: {wanted}, "
                        f"{field} in object meta: {meta(obj).get(field)}",
                    )
            policy = propagation or ("Orphan" if info is JOBS else "Background")
            if policy == "Orphan":
                self._orphan(meta(obj)["uid"])
            grace = self._grace(info, obj, grace)
            if grace == 0 and not meta(obj).get("finalizers"):
                self.remove(info, namespace, name)
                return obj, True

            def mark(o: Obj) -> None:
                m = meta(o)
                if m.get("deletionTimestamp") is None:
                    m["deletionTimestamp"] = timestamp(self.clock.time() + grace)
                    m["deletionGracePeriodSeconds"] = grace
                else:
                    m["deletionGracePeriodSeconds"] = min(grace, m["deletionGracePeriodSeconds"])

            obj = self.modify(info, namespace, name, mark) or obj
            return obj, self.find(info, namespace, name) is None

    @staticmethod
    def _grace(info: ResourceInfo, obj: Obj, grace: int | None) -> int:
        """Seconds a deletion waits for the kubelet: only for a pod bound and not ended."""
        if info is not PODS:
            return 0
        spec, phase = obj.get("spec") or {}, (obj.get("status") or {}).get("phase")
        if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            return 0
        return int(spec.get("terminationGracePeriodSeconds", 30) if grace is None else grace)

    def _finish_if_released(self, info: ResourceInfo, obj: Obj) -> None:
        """Remove an object being deleted once its finalizers and its grace are gone."""
        metadata = meta(obj)
        if metadata.get("deletionTimestamp") is None or metadata.get("finalizers"):
            return
        if info is PODS and metadata.get("deletionGracePeriodSeconds", 0) > 0:
            return
        self.remove(info, metadata.get("namespace", ""), metadata["name"])

    def remove(self, info: ResourceInfo, namespace: str, name: str) -> None:
        """Drop an object for good (a DELETED change) and delete its dependents."""
        with self.lock:
            obj = self.find(info, namespace, name)
            if obj is None:
                return
            self._write(info, copy.deepcopy(obj), "DELETED", obj)
            uid = meta(obj)["uid"]
            for dep_info, dep in self._dependents(uid):
                dep_meta = meta(dep)
                if self.find(dep_info, dep_meta.get("namespace", ""), dep_meta["name"]):
                    self.delete(dep_info, dep_meta.get("namespace", ""), dep_meta["name"])

    def _dependents(self, uid: str) -> list[tuple[ResourceInfo, Obj]]:
        found = []
        for info in all_resources():
            for obj in self._objects[info.key].values():
                refs = meta(obj).get("ownerReferences") or []
                if any(ref.get("uid") == uid for ref in refs):
                    found.append((info, obj))
        return found

    def _orphan(self, uid: str) -> None:
        for info, dep in self._dependents(uid):

            def drop(o: Obj) -> None:
                refs = [r for r in meta(o).get("ownerReferences") or [] if r.get("uid") != uid]
                meta(o)["ownerReferences"] = refs

            self.modify(info, meta(dep).get("namespace", ""), meta(dep)["name"], drop)

    # -- watching ------------------------------------------------------------------------

    def changes_since(self, rv: int) -> list[Change]:
        """The changes after `rv`; 410 Expired when the history no longer reaches back."""
        with self.lock:
            return self._history.since(rv)

    def wait(self, since_rv: int, timeout: float) -> bool:
        """Wait until something is written after `since_rv` (or the store closes)."""
        with self._changed:
            return self._changed.wait_for(
                lambda: self._rv > since_rv or self.closed, timeout=max(timeout, 0)
            )

    def poke(self) -> None:
        """Wake every waiter (the clock moved, a process ended ...)."""
        with self._changed:
            self._changed.notify_all()

    def compact(self) -> None:
        """Forget the history, as etcd compaction does: older watches get 410."""
        with self.lock:
            self._history.compact(self._rv)

    def close(self) -> None:
        """End every watch."""
        with self._changed:
            self.closed = True
            self._changed.notify_all()

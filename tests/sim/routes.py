"""Request paths of the simulated API server and how RBAC names what they ask.

A path `/api/v1[/namespaces/<ns>]/<resource>[/<name>[/<sub>]]` (or the same under
`/apis/<group>/<version>`) names a resource type, a namespace, an object and a subresource;
the HTTP method and the `watch` parameter make the RBAC verb (`get`, `list`, `watch`,
`create`, `update`, `patch`, `delete`, `deletecollection`), as an RBAC rule would match the
request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.sim import status
from tests.sim.history import Change
from tests.sim.resources import ResourceInfo, lookup
from tests.sim.store import Obj, meta


@dataclass(frozen=True)
class AccessRecord:
    """One request, as an RBAC rule would match it."""

    verb: str
    group: str
    resource: str
    namespace: str | None
    subresource: str | None
    name: str | None
    # beyond RBAC, for the tests of what a client asks: a list's label selector, and whether
    # it asked for the objects' metadata only (`metadata`) or whole (``)
    selector: str | None = None
    view: str = ""
    field_validation: str | None = None
    """A write's `fieldValidation` as asked (None: not asked, or not a write)."""


@dataclass(frozen=True)
class Route:
    """A parsed request path."""

    info: ResourceInfo
    namespace: str | None
    name: str | None
    sub: str | None


def parse_route(path: str) -> Route | None:
    """The resource a path names, None for a path the server does not serve."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    info = lookup(group, version, rest[0])
    if info is None or (namespace is not None and not info.namespaced):
        return None
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if (info.namespaced and name is not None and namespace is None) or (
        sub is not None and sub not in info.subresources
    ):
        return None
    return Route(info, namespace, name, sub)


def watch_view(change: Change, route: Route, match: Any) -> tuple[str, Obj] | None:
    """What a watcher of `route` sees of a change: an event type and object, or nothing."""
    if change.info is not route.info:
        return None
    if route.namespace is not None and meta(change.obj).get("namespace") != route.namespace:
        return None
    now_in = match(change.obj)
    was_in = change.old is not None and match(change.old)
    if change.type == "MODIFIED":
        if now_in:
            return ("MODIFIED" if was_in else "ADDED"), change.obj
        return ("DELETED", change.obj) if was_in else None
    return (change.type, change.obj) if now_in else None


def rbac_verb(method: str, route: Route, params: dict[str, str]) -> str:
    """The RBAC verb of a request; 405 for a method the path does not take."""
    if method == "GET":
        if route.name is None:
            return "watch" if flag(params.get("watch")) else "list"
        return "get"
    if method == "POST":
        if route.name is None:
            return "create"
        if route.sub == "eviction":
            return "create"
        raise status.method_not_allowed("POST")
    if route.name is None:
        if method == "DELETE":
            return "deletecollection"
        raise status.method_not_allowed(method)
    return {"PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]


def flag(value: str | None) -> bool:
    """A boolean query parameter as Go's strconv.ParseBool reads it."""
    return (value or "").lower() in ("1", "t", "true")

"""The simulated kube-apiserver: HTTP on 127.0.0.1, the paths and verbs simrun uses.

Paths: `/api/v1[/namespaces/<ns>]/<resource>[/<name>[/<sub>]]` and the same under
`/apis/<group>/<version>`. Verbs: list (with labelSelector, fieldSelector, limit/continue; the
objects' metadata only for `Accept: application/json;as=PartialObjectMetadataList;...`),
watch (`watch=true`: chunked JSON lines from a resourceVersion until `timeoutSeconds`),
get, create (201), update (PUT, 409 on a stale resourceVersion), patch (JSON merge, JSON
patch, strategic merge; 415 for strategic merge on a custom resource, 422 for a list sent
as a merge patch, 400 for an object sent as a JSON patch), delete (200 gone / 202 pending,
with grace, propagation and preconditions), deletecollection, `pods/<name>/log` (container,
tailLines, limitBytes, follow) and `pods/<name>/eviction`. Every request is appended to
`access_log` as the (verb, group, resource, namespace, subresource, name) RBAC would check.

What requests mean apart from HTTP lives beside it: paths and RBAC verbs (`routes`), list
pages (`lists`), patch types (`patches`), `fieldValidation` (`decoding`).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlparse

from tests.sim import status
from tests.sim.decoding import validation_mode
from tests.sim.lists import list_page, metadata_only
from tests.sim.patches import check_patch_type, patcher
from tests.sim.resources import JOBS, PODS
from tests.sim.routes import AccessRecord, Route, flag, parse_route, rbac_verb, watch_view
from tests.sim.selectors import field_matcher, label_matcher
from tests.sim.status import ApiError
from tests.sim.store import Obj, Store, meta

ORPHAN_WARNING = (
    '299 - "child pods are preserved by default when jobs are deleted; set '
    "propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress "
    'this warning"'
)


class LogReader(Protocol):
    """Where the server reads container logs from (the simulated kubelet)."""

    def read_log(
        self, pod: Obj, container: str | None, tail: int | None, limit: int | None, previous: bool
    ) -> bytes: ...

    def follow_log(self, pod: Obj, container: str | None, tail: int | None) -> Iterator[bytes]: ...


class ApiServer:
    """The HTTP front of a Store."""

    def __init__(self, store: Store, logs: LogReader, host: str = "127.0.0.1") -> None:
        self.store = store
        self.logs = logs
        self.access_log: list[AccessRecord] = []
        handler = type("Handler", (_Handler,), {"api": self})
        self._server = ThreadingHTTPServer((host, 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True, name="sim-apiserver"
        )

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """End the watches and stop serving."""
        self.store.close()
        self._server.shutdown()
        self._server.server_close()

    def write_kubeconfig(self, path: Path, namespace: str) -> Path:
        """A kubeconfig for `kubernetes.config.load_kube_config(config_file=path)`."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sim", "cluster": {"server": self.url}}],
            "users": [{"name": "sim", "user": {"token": "sim-token"}}],
            "contexts": [
                {
                    "name": "sim",
                    "context": {"cluster": "sim", "user": "sim", "namespace": namespace},
                }
            ],
            "current-context": "sim",
        }
        path.write_text(json.dumps(config, indent=2))
        return path


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    api: ApiServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines."""

    # -- plumbing ------------------------------------------------------------------------

    def _params(self) -> dict[str, str]:
        query = parse_qs(urlparse(self.path).query)
        return {k: v[-1] for k, v in query.items()}

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as error:
            raise status.bad_request(f"error decoding body: {error}") from error

    def _send(
        self,
        code: int,
        body: Any,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _start_stream(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _handle(self, method: str) -> None:
        try:
            self._dispatch(method)
        except ApiError as error:
            self._send(error.code, error.body())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as error:  # a bug of the simulator: say so, loudly
            traceback.print_exc(file=sys.stderr)
            self._send(500, ApiError(500, "InternalError", f"simulator: {error!r}").body())

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # -- dispatch ------------------------------------------------------------------------

    def _discovery(self, path: str) -> bool:
        documents: dict[str, Any] = {
            "/version": {
                "major": "1",
                "minor": "35",
                "gitVersion": "v1.35.5-sim",
                "platform": "linux/amd64",
            },
            "/api": {"kind": "APIVersions", "versions": ["v1"]},
            "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
        }
        if path.rstrip("/") in documents:
            self._send(200, documents[path.rstrip("/")])
            return True
        return False

    def _dispatch(self, method: str) -> None:
        path = urlparse(self.path).path
        if method == "GET" and self._discovery(path):
            return
        route = parse_route(path)
        if route is None:
            raise status.unknown_path()
        params = self._params()
        verb = rbac_verb(method, route, params)
        info = route.info
        view = "metadata" if metadata_only(self.headers.get("Accept") or "") else ""
        self.api.access_log.append(
            AccessRecord(
                verb,
                info.group,
                info.plural,
                route.namespace,
                route.sub,
                route.name,
                params.get("labelSelector"),
                view,
                params.get("fieldValidation") if method in ("POST", "PUT", "PATCH") else None,
            )
        )
        namespace = route.namespace or ""
        handler = getattr(self, f"_{verb}")
        handler(route, namespace, params)

    def _matcher(self, route: Route, params: dict[str, str]) -> Any:
        labels = label_matcher(params.get("labelSelector"))
        fields = field_matcher(params.get("fieldSelector"), route.info)
        return lambda obj: labels(obj) and fields(obj)

    # -- verbs ---------------------------------------------------------------------------

    def _list(self, route: Route, namespace: str, params: dict[str, str]) -> None:
        items, rv = self.api.store.objects(
            route.info, route.namespace, self._matcher(route, params)
        )
        metadata = metadata_only(self.headers.get("Accept") or "")
        body = list_page(route.info, items, rv, params, metadata)
        self._send(200, body)

    def _watch(self, route: Route, namespace: str, params: dict[str, str]) -> None:
        store, match = self.api.store, self._matcher(route, params)
        deadline = time.monotonic() + float(params.get("timeoutSeconds") or 1800)
        self._start_stream("application/json")
        start = params.get("resourceVersion")
        try:
            if start in (None, "", "0"):
                with store.lock:
                    items, cursor = store.objects(route.info, route.namespace, match)
                for obj in items:
                    self._chunk(_event("ADDED", obj))
            else:
                cursor = int(start)
            while not store.closed and time.monotonic() < deadline:
                changes = store.changes_since(cursor)
                for change in changes:
                    cursor = change.rv
                    view = watch_view(change, route, match)
                    if view is not None:
                        self._chunk(_event(*view))
                if not changes:
                    store.wait(cursor, min(deadline - time.monotonic(), 0.5))
        except ApiError as error:
            self._chunk(json.dumps({"type": "ERROR", "object": error.body()}).encode() + b"\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _get(self, route: Route, namespace: str, params: dict[str, str]) -> None:
        obj = self.api.store.get(route.info, namespace, route.name or "")
        if route.sub != "log":
            self._send(200, obj)
            return
        tail = int(params["tailLines"]) if params.get("tailLines") else None
        container = params.get("container")
        if flag(params.get("follow")):
            chunks = self.api.logs.follow_log(obj, container, tail)
            first = next(chunks)  # errors (no host yet ...) surface before the stream starts
            self._start_stream("text/plain")
            for data in (first, *chunks):
                if data:
                    self._chunk(data)
            self.wfile.write(b"0\r\n\r\n")
            return
        limit = int(params["limitBytes"]) if params.get("limitBytes") else None
        previous = flag(params.get("previous"))
        data = self.api.logs.read_log(obj, container, tail, limit, previous)
        self._send(200, data, "text/plain")

    def _written(self, code: int, obj: Any, warnings: list[str]) -> None:
        """The answer of a write, with a `Warning` header per dropped field (RFC 7234)."""
        headers = {"Warning": ", ".join(f"299 - {json.dumps(w)}" for w in warnings)}
        self._send(code, obj, headers=headers if warnings else None)

    def _create(self, route: Route, namespace: str, params: dict[str, str]) -> None:
        body = self._body()
        if not isinstance(body, dict):
            raise status.bad_request("the body of the request must be an object")
        if route.sub == "eviction":
            options = body.get("deleteOptions") or {}
            self.api.store.delete(
                PODS, namespace, route.name or "", grace=options.get("gracePeriodSeconds")
            )
            self._send(
                201,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "code": 201,
                },
            )
            return
        mode, warnings = validation_mode(params, "CreateOptions"), list[str]()
        created = self.api.store.create(
            route.info, namespace, body, validation=mode, warnings=warnings
        )
        self._written(201, created, warnings)

    def _update(self, route: Route, namespace: str, params: dict[str, str]) -> None:
        body = self._body()
        if not isinstance(body, dict):
            raise status.bad_request("the body of the request must be an object")
        mode, warnings = validation_mode(params, "UpdateOptions"), list[str]()
        obj = self.api.store.replace(
            route.info,
            namespace,
            route.name or "",
            body,
            route.sub,
            validation=mode,
            warnings=warnings,
        )
        self._written(200, obj, warnings)

    def _patch(self, route: Route, namespace: str, params: dict[str, str]) -> None:
        info, name = route.info, route.name or ""
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        check_patch_type(info, ctype)
        body = self._body()
        change = patcher(info, name, ctype, body)

        patch = json.dumps(body, separators=(",", ":"))
        mode, warnings = validation_mode(params, "PatchOptions"), list[str]()
        obj = self.api.store.apply_update(
            info, namespace, name, change, route.sub, patch, validation=mode, warnings=warnings
        )
        self._written(200, obj, warnings)

    def _delete(self, route: Route, namespace: str, params: dict[str, str]) -> None:
        options = self._body() or {}
        grace = params.get("gracePeriodSeconds", options.get("gracePeriodSeconds"))
        policy = params.get("propagationPolicy") or options.get("propagationPolicy")
        obj, gone = self.api.store.delete(
            route.info,
            namespace,
            route.name or "",
            grace=None if grace is None else int(grace),
            propagation=policy,
            preconditions=options.get("preconditions"),
        )
        headers = {"Warning": ORPHAN_WARNING} if route.info is JOBS and not policy else None
        body = (
            obj
            if (route.info is PODS or route.info.custom)
            else status.success(route.info, meta(obj)["name"], meta(obj)["uid"])
        )
        self._send(200 if gone else 202, body, headers=headers)

    def _deletecollection(self, route: Route, namespace: str, params: dict[str, str]) -> None:
        items, rv = self.api.store.objects(
            route.info, route.namespace, self._matcher(route, params)
        )
        for obj in items:
            self.api.store.delete(route.info, meta(obj).get("namespace", ""), meta(obj)["name"])
        self._send(
            200,
            {
                "kind": f"{route.info.kind}List",
                "apiVersion": route.info.api_version,
                "metadata": {"resourceVersion": str(rv)},
                "items": items,
            },
        )


def _event(kind: str, obj: Obj) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"

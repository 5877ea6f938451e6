"""The simulated Argo server: the one route simrun uses, a workflow with its nodes hydrated.

`GET /api/v1/workflows/{namespace}/{name}` answers the workflow of the store with its nodes in
`status.nodes` (decompressed, or read from the offload table), `compressedNodes` and
`offloadNodeStatusVersion` cleared (`GetWorkflow` in server/workflow/workflow_server.go, which
calls the hydrator). Errors are gRPC-gateway JSON, `{"code": <gRPC code>, "message": …}`:
401 (code 16, "token not valid…", server/auth/gatekeeper.go) without the bearer token the
server was given, 404 (code 5) for an unknown workflow, 500 (code 13) for offloaded nodes
the table lacks. Every request's path is kept in `requests`. Given a server-side TLS context
it serves HTTPS, as Argo's server does by default (`--secure`, a self-signed certificate).
"""

from __future__ import annotations

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse

from tests.sim.argo.packing import NodeStatusPacker
from tests.sim.resources import WORKFLOWS
from tests.sim.store import Store

TOKEN_NOT_VALID = "token not valid. see https://argo-workflows.readthedocs.io/en/latest/faq/"


class ArgoServer:
    """An HTTP server on 127.0.0.1 in front of the store and the packer's offload table."""

    def __init__(
        self,
        store: Store,
        packer: NodeStatusPacker,
        token: str = "argo-sim",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.store = store
        self.packer = packer
        self.token = token
        self.requests: list[str] = []
        handler = type("Handler", (_Handler,), {"server_of": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._scheme = "http"
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
            self._scheme = "https"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True, name="sim-argo-server"
        )
        self._started = False

    @property
    def url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> ArgoServer:
        self._thread.start()
        self._started = True
        return self

    def stop(self) -> None:
        if self._started:
            self._server.shutdown()
        self._server.server_close()

    def answer(self, path: str, authorization: str) -> tuple[int, dict[str, Any]]:
        """The status code and body of a GET of `path`."""
        self.requests.append(path)
        if authorization != f"Bearer {self.token}":
            return 401, {"code": 16, "message": TOKEN_NOT_VALID}
        parts = [unquote(p) for p in path.split("/") if p]
        if len(parts) != 5 or parts[:3] != ["api", "v1", "workflows"]:
            return 404, {"code": 5, "message": "Not Found"}
        namespace, name = parts[3], parts[4]
        found = self.store.find(WORKFLOWS, namespace, name)
        if found is None:
            return 404, {"code": 5, "message": f'workflows.argoproj.io "{name}" not found'}
        try:
            return 200, self.packer.hydrated(found)
        except KeyError:
            return 500, {"code": 13, "message": "offloaded nodes not found"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_of: ArgoServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines."""

    def do_GET(self) -> None:
        code, body = self.server_of.answer(
            urlparse(self.path).path, self.headers.get("Authorization") or ""
        )
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

"""The Argo server's API, for the one thing the Kubernetes API cannot give: offloaded nodes.

When Argo has offloaded a workflow's node status to its database
(`status.offloadNodeStatusVersion`, `node_status.py`), the Workflow object holds no nodes. The
Argo server's `GET /api/v1/workflows/{namespace}/{name}` answers the workflow hydrated: it
reads the object, then the nodes of that version from the database, and returns them in
`status.nodes` with the version cleared (`GetWorkflow` in
[server/workflow/workflow_server.go](https://github.com/argoproj/argo-workflows/blob/main/server/workflow/workflow_server.go),
`Hydrate` in [workflow/hydrator/hydrator.go](https://github.com/argoproj/argo-workflows/blob/main/workflow/hydrator/hydrator.go);
the route in pkg/apiclient/workflow/workflow.proto). The server authenticates the request's
bearer token (its `--auth-mode=client`, the default) and reads the workflow with that
identity, so the token of simrun's service account, which may get workflows, is enough.

Every failure (no answer, refused, not found, a server without a database) is a
NodesUnreadable that says what happened; the run keeps its state meanwhile.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from cluster.argo.config import ClusterConfig
from cluster.argo.node_status import NodesUnreadable, offload_version

HTTP_TIMEOUT_S = 10
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
ANSWER_LIMIT_BYTES = 512 * 1024 * 1024
"""The most a hydrated workflow may weigh (its nodes are limited apart, as JSON)."""


def _token(config: ClusterConfig) -> str:
    """The bearer token: the configured file, else the pod's service account (read at every
    request: projected tokens are renewed), else none."""
    path = Path(config.argo_server_token_file) if config.argo_server_token_file else None
    if path is None and SERVICE_ACCOUNT_TOKEN.exists():
        path = SERVICE_ACCOUNT_TOKEN
    try:
        return path.read_text().strip() if path is not None else ""
    except OSError as error:
        raise NodesUnreadable(f"the Argo server's token cannot be read: {error}") from None


def _context(config: ClusterConfig) -> ssl.SSLContext | None:
    if not config.argo_server_url.startswith("https:"):
        return None
    try:
        context = ssl.create_default_context(cafile=config.argo_server_ca_file or None)
    except (OSError, ssl.SSLError) as error:  # missing, unreadable, not PEM
        raise NodesUnreadable(
            f"the Argo server's CA file ({config.argo_server_ca_file}) cannot be read: {error}"
        ) from None
    if config.argo_server_insecure:  # Argo's own self-signed certificate: the operator's choice
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _reason(error: urllib.error.HTTPError) -> str:
    """The message of the server's error body (gRPC-gateway JSON), else its HTTP reason."""
    try:
        body = json.loads(error.read(64 * 1024) or b"{}")
        return str(body.get("message") or error.reason)
    except (OSError, ValueError, AttributeError):
        return str(error.reason)


def hydrated_workflow(config: ClusterConfig, namespace: str, name: str) -> dict[str, Any]:
    """The workflow with its offloaded nodes in `status.nodes`, from the Argo server;
    NodesUnreadable (why) when it cannot be had."""
    url = (
        f"{config.argo_server_url.rstrip('/')}/api/v1/workflows/"
        f"{urllib.parse.quote(namespace, safe='')}/{urllib.parse.quote(name, safe='')}"
    )
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    token = _token(config)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    where = f"the Argo server ({config.argo_server_url})"
    context = _context(config)
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S, context=context) as reply:
            data = reply.read(ANSWER_LIMIT_BYTES + 1)
    except urllib.error.HTTPError as error:
        raise NodesUnreadable(
            f"{where} answered {error.code} for the workflow's offloaded node status: "
            f"{_reason(error)}"
        ) from None
    except (OSError, ValueError) as error:  # refused, unreachable, TLS, timeout, bad URL
        raise NodesUnreadable(f"{where} cannot be reached: {error}") from None
    if len(data) > ANSWER_LIMIT_BYTES:
        raise NodesUnreadable(f"{where} answered more than {ANSWER_LIMIT_BYTES} bytes")
    try:
        found = json.loads(data)
    except ValueError:
        raise NodesUnreadable(f"{where} answered no JSON") from None
    if not isinstance(found, dict) or offload_version(found):
        raise NodesUnreadable(f"{where} answered the workflow without its nodes")
    return found


def hydrated(workflow: dict[str, Any], config: ClusterConfig) -> dict[str, Any]:
    """The workflow with its nodes in the object: itself, or, when Argo offloaded them and an
    Argo server is configured, the server's hydrated copy. NodesUnreadable from the server;
    without one, `node_status.workflow_nodes` says what to set."""
    if not offload_version(workflow) or not config.argo_server_url:
        return workflow
    name = str((workflow.get("metadata") or {}).get("name", ""))
    return hydrated_workflow(config, config.namespace, name)

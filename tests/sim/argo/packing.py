"""How the simulated Argo stores a large workflow's node status: compressed, or offloaded.

Argo's hydrator, as the workflow controller runs it around every write (`Dehydrate` before it,
`Hydrate` before it operates) and the Argo server before it answers a workflow:

- Dehydrate: when the workflow as JSON is larger than `MAX_WORKFLOW_SIZE` (1 MiB by default),
  the nodes become `status.compressedNodes` (standard base64 of gzip, at gzip's default level,
  of the JSON of the nodes map) and `status.nodes` is emptied (`CompressWorkflowIfNeeded`).
  When the workflow is still too large, or always with `ALWAYS_OFFLOAD_NODE_STATUS=true`,
  the nodes go to the offload table (`persistence.nodeStatusOffLoad`) under the version
  `fnv:<FNV-1 32 of their JSON>` and both fields are emptied, `offloadNodeStatusVersion`
  set. Without offloading, a workflow still too large is marked Error with Argo's message
  (`markWorkflowError` after a failed `Dehydrate` in `persistUpdates`).
- Hydrate: the compressed nodes when `status.nodes` is empty, then the offloaded ones of the
  version, with both fields cleared.

Sources: workflow/packer/packer.go, workflow/hydrator/hydrator.go, util/file/fileutil.go,
persist/sqldb/offload_node_status_repo.go (`nodeStatusVersion`), operator.go `persistUpdates`;
docs/offloading-large-workflows.md. Not simulated: zstd and brotli (v4.1's
`WORKFLOW_COMPRESSION_ALGORITHM`), the offload table's garbage collection, etcd's own limit.
"""

from __future__ import annotations

import base64
import copy
import gzip
import json
import threading
from dataclasses import dataclass
from typing import Any

from tests.sim.store import Obj, meta

TOO_LARGE = "workflow is longer than maximum allowed size."
NOT_SUPPORTED = "offload node status is not supported"
GZIP_DEFAULT_LEVEL = 6


@dataclass(frozen=True)
class NodeStatusStorage:
    """The controller's settings for large workflows (tests may make the limit small)."""

    max_workflow_size: int = 1024 * 1024
    """`MAX_WORKFLOW_SIZE`: the largest workflow, as JSON, written with plain `status.nodes`."""
    offload: bool = False
    """`persistence.nodeStatusOffLoad`: a database takes the nodes of a workflow still too
    large once compressed."""
    always_offload: bool = False
    """`ALWAYS_OFFLOAD_NODE_STATUS=true`: every workflow's nodes are offloaded."""


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def fnv1_32(data: bytes) -> int:
    """FNV-1 (not 1a) of 32 bits, Go's `hash/fnv.New32`."""
    value = 0x811C9DC5
    for byte in data:
        value = (value * 0x01000193) & 0xFFFFFFFF
        value ^= byte
    return value


def compress_nodes(nodes: dict[str, Any]) -> str:
    """`file.CompressEncodeString` of the nodes' JSON."""
    return base64.b64encode(gzip.compress(_json(nodes), GZIP_DEFAULT_LEVEL, mtime=0)).decode()


class NodeStatusPacker:
    """Dehydrates and hydrates workflows' statuses, holding the offload table."""

    def __init__(self, storage: NodeStatusStorage | None = None) -> None:
        self.storage = storage or NodeStatusStorage()
        self._offloaded: dict[tuple[str, str], bytes] = {}
        self._lock = threading.Lock()

    def offloaded(self) -> int:
        """How many versions the offload table holds."""
        with self._lock:
            return len(self._offloaded)

    def hydrated_status(self, workflow: Obj) -> dict[str, Any]:
        """A copy of the workflow's status with its nodes in `status.nodes`; KeyError for an
        offloaded version the table does not hold."""
        status = copy.deepcopy(workflow.get("status") or {})
        compressed = status.pop("compressedNodes", "")
        if compressed and not status.get("nodes"):
            status["nodes"] = json.loads(gzip.decompress(base64.b64decode(compressed)))
        version = status.pop("offloadNodeStatusVersion", "")
        if version:
            with self._lock:
                data = self._offloaded[(meta(workflow).get("uid", ""), version)]
            status["nodes"] = json.loads(data)
        return status

    def hydrated(self, workflow: Obj) -> Obj:
        """The workflow with its nodes in `status.nodes` (the Argo server's answer): itself
        when they are, else a copy."""
        status = workflow.get("status") or {}
        if not status.get("compressedNodes") and not status.get("offloadNodeStatusVersion"):
            return workflow
        found = {k: v for k, v in workflow.items() if k != "status"}
        found = copy.deepcopy(found)
        found["status"] = self.hydrated_status(workflow)
        return found

    def _large(self, workflow: Obj) -> tuple[bool, int]:
        size = len(_json(workflow))
        return size > self.storage.max_workflow_size, size

    def dehydrate(self, workflow: Obj) -> str | None:
        """Store the nodes of `workflow` (in place) as Argo would; Argo's error when the
        workflow stays too large and nothing may take its nodes."""
        status = workflow.setdefault("status", {})
        nodes = status.get("nodes") or {}
        if not nodes:
            return None
        error = ""
        if not self.storage.always_offload:
            large, _ = self._large(workflow)
            if not large:
                status.pop("offloadNodeStatusVersion", None)
                return None
            del status["nodes"]
            status["compressedNodes"] = compress_nodes(nodes)
            large, size = self._large(workflow)
            if not large:
                status.pop("offloadNodeStatusVersion", None)
                return None
            del status["compressedNodes"]
            status["nodes"] = nodes
            limit = self.storage.max_workflow_size
            error = f"{TOO_LARGE} compressed size {size} > maxSize {limit}"
        if not self.storage.offload:
            return f"{error}Tried to offload but encountered error: {NOT_SUPPORTED}"
        data = _json(nodes)
        version = f"fnv:{fnv1_32(data)}"
        with self._lock:
            self._offloaded[(meta(workflow).get("uid", ""), version)] = data
        status.pop("nodes", None)
        status.pop("compressedNodes", None)
        status["offloadNodeStatusVersion"] = version
        return None

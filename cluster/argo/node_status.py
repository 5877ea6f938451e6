"""A workflow's node status as Argo stores it: in `status.nodes`, compressed, or offloaded.

Argo keeps a Workflow object under etcd's limit. When the object as JSON grows past the
workflow controller's `MAX_WORKFLOW_SIZE` (1 MiB by default), the controller compresses the
nodes before it writes the workflow (`CompressWorkflowIfNeeded`): `status.compressedNodes`
becomes the standard base64 of the gzip of the JSON of the nodes map
(`file.CompressEncodeString`) and `status.nodes` is emptied. When the object is still too
large and node status offloading is configured (`persistence.nodeStatusOffLoad`; or always,
with `ALWAYS_OFFLOAD_NODE_STATUS=true`), the nodes go to Argo's SQL database instead: both
fields are emptied and `status.offloadNodeStatusVersion` names the stored version; only the
Argo server's API (which hydrates them) or that database has them then. A reader hydrates as
Argo's own hydrator does: the compressed nodes when `status.nodes` is empty, then the
offloaded ones whenever a version is set.

Argo v4.1 can also write zstd or brotli (`WORKFLOW_COMPRESSION_ALGORITHM`, off by default);
its reader tells them by their first bytes (zstd's magic, gzip's, anything else brotli).
simrun reads gzip only and says which algorithm it found otherwise.

Sources (argoproj/argo-workflows):
- [workflow/packer/packer.go](https://github.com/argoproj/argo-workflows/blob/main/workflow/packer/packer.go):
  `MAX_WORKFLOW_SIZE`, `CompressWorkflowIfNeeded`, `DecompressWorkflow`;
- [util/file/fileutil.go](https://github.com/argoproj/argo-workflows/blob/main/util/file/fileutil.go):
  `CompressEncodeString`, `DecodeDecompressString`, `DecompressContent`;
- [workflow/hydrator/hydrator.go](https://github.com/argoproj/argo-workflows/blob/main/workflow/hydrator/hydrator.go):
  `Hydrate`, `Dehydrate`, `ALWAYS_OFFLOAD_NODE_STATUS`;
- [docs/offloading-large-workflows.md](https://github.com/argoproj/argo-workflows/blob/main/docs/offloading-large-workflows.md).
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Mapping
from typing import Any

NODES_LIMIT_BYTES = 64 * 1024 * 1024
"""The most JSON a compressed node status may decompress to (a bound against a hostile or
corrupt value); ~1.1 KB a pod of a split task, so some 50,000 pods."""
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_CHUNK = 1024 * 1024
_GZIP = 16 + zlib.MAX_WBITS  # zlib's window bits for a gzip member
OFFLOADED = (
    "Argo offloaded this workflow's node status to its database "
    "(status.offloadNodeStatusVersion); simrun cannot read it without the Argo server: set "
    "SIMRUN_ARGO_SERVER_URL (docs/argo-backend.md). The run keeps its last known state until "
    "then."
)
"""The same text whatever the version, so the run's record is not written again at every
change of the offloaded nodes."""


class NodesUnreadable(ValueError):
    """The node status of a workflow cannot be read; the text says why (the run's message)."""


def offload_version(workflow: Mapping[str, Any]) -> str:
    """`status.offloadNodeStatusVersion`: set when Argo offloaded the nodes, else empty."""
    return str((workflow.get("status") or {}).get("offloadNodeStatusVersion") or "")


def _gunzip(data: bytes, limit_bytes: int) -> bytes:
    """Every gzip member of `data` (Go's reader reads concatenated members), at most
    `limit_bytes` of output; NodesUnreadable for a corrupt, truncated or larger one."""
    out = bytearray()
    rest = data
    while rest:
        if not rest.startswith(GZIP_MAGIC):
            raise NodesUnreadable("status.compressedNodes: bytes after the gzip data")
        inflate = zlib.decompressobj(_GZIP)
        try:
            while not inflate.eof:
                chunk = inflate.decompress(rest, min(_CHUNK, limit_bytes + 1 - len(out)))
                out += chunk
                if len(out) > limit_bytes:
                    raise NodesUnreadable(
                        f"status.compressedNodes decompresses to more than {limit_bytes} bytes "
                        "(SIMRUN_ARGO_NODES_LIMIT_MB)"
                    )
                rest = inflate.unconsumed_tail
                if not chunk and not rest:
                    raise NodesUnreadable("status.compressedNodes: the gzip data is cut short")
        except zlib.error as error:
            raise NodesUnreadable(f"status.compressedNodes is not valid gzip: {error}") from None
        rest = inflate.unused_data
    return bytes(out)


def decompress_nodes(text: str, *, limit_bytes: int = NODES_LIMIT_BYTES) -> dict[str, Any]:
    """The nodes map of a `status.compressedNodes` value (`DecodeDecompressString`, then the
    JSON); NodesUnreadable when it is no such value or decompresses past `limit_bytes`."""
    try:
        data = base64.b64decode(text.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        raise NodesUnreadable("status.compressedNodes is not base64") from None
    if data.startswith(ZSTD_MAGIC):
        raise NodesUnreadable(
            "status.compressedNodes is compressed with zstd (Argo's "
            "WORKFLOW_COMPRESSION_ALGORITHM); simrun reads gzip, Argo's default: unset it on "
            "Argo's workflow-controller"
        )
    if not data.startswith(GZIP_MAGIC):
        raise NodesUnreadable(
            "status.compressedNodes is not gzip (brotli, Argo's WORKFLOW_COMPRESSION_ALGORITHM, "
            "or corrupt); simrun reads gzip, Argo's default"
        )
    text_bytes = _gunzip(data, limit_bytes)
    try:
        nodes = json.loads(text_bytes)
    except ValueError as error:  # UnicodeDecodeError too
        raise NodesUnreadable(f"status.compressedNodes holds no JSON: {error}") from None
    if not isinstance(nodes, dict) or not all(isinstance(n, dict) for n in nodes.values()):
        raise NodesUnreadable("status.compressedNodes holds no map of nodes")
    return nodes


def workflow_nodes(
    workflow: Mapping[str, Any], *, limit_bytes: int = NODES_LIMIT_BYTES
) -> dict[str, Any]:
    """The workflow's nodes by id, wherever Argo put them in the object (see the module
    docstring); NodesUnreadable when they are offloaded or cannot be decoded."""
    status = workflow.get("status") or {}
    if offload_version(workflow):
        raise NodesUnreadable(OFFLOADED)
    nodes: dict[str, Any] = status.get("nodes") or {}
    if not nodes and status.get("compressedNodes"):
        return decompress_nodes(str(status["compressedNodes"]), limit_bytes=limit_bytes)
    return nodes

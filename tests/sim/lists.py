"""What the simulated API server answers to a list: pages and the objects' views.

A list pages with `limit` and `continue` (the token keeps the first list's resourceVersion,
`remainingItemCount` says what is left). Items of built-in types drop their kind and
apiVersion, custom objects keep theirs (typed list encoding vs unstructured). With `Accept:
application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1` the list is a
`PartialObjectMetadataList` whose items hold the objects' metadata only, for any resource
(Kubernetes ≥ 1.15, the apiserver's `transformResponseObject`).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from tests.sim.resources import ResourceInfo
from tests.sim.store import Obj, meta

META_VERSION = "meta.k8s.io/v1"


def list_page(
    info: ResourceInfo, items: list[Obj], rv: int, params: dict[str, str], metadata: bool
) -> dict[str, Any]:
    """The body answering a list of `items` (stored at `rv`) as the query `params` page it;
    the objects' metadata only when `metadata`."""
    body: dict[str, Any] = {
        "kind": f"{info.kind}List",
        "apiVersion": info.api_version,
        "metadata": {"resourceVersion": str(rv)},
    }
    start = 0
    if params.get("continue"):
        token = json.loads(base64.b64decode(params["continue"]))
        start, body["metadata"]["resourceVersion"] = token["start"], token["rv"]
    limit = int(params.get("limit") or 0)
    page = items[start : start + limit] if limit else items[start:]
    if limit and start + limit < len(items):
        token = {"start": start + limit, "rv": body["metadata"]["resourceVersion"]}
        body["metadata"]["continue"] = base64.b64encode(json.dumps(token).encode()).decode()
        body["metadata"]["remainingItemCount"] = len(items) - start - limit
    if metadata:
        body["kind"], body["apiVersion"] = "PartialObjectMetadataList", META_VERSION
        body["items"] = [_metadata_item(obj) for obj in page]
    else:
        body["items"] = [_as_item(info, obj) for obj in page]
    return body


def _as_item(info: ResourceInfo, obj: Obj) -> Obj:
    """A list item: built-in types drop their kind and apiVersion, custom ones keep them."""
    if info.custom:
        return obj
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def metadata_only(accept: str) -> bool:
    """Whether the Accept header asks for a list of the objects' metadata only (what
    `PartialObjectMetadataList` of meta.k8s.io/v1 serves for any resource, Kubernetes ≥ 1.15)."""
    for media in accept.split(","):
        kind, *parameters = (part.strip() for part in media.split(";"))
        found = dict(p.partition("=")[::2] for p in parameters)
        if kind == "application/json" and found == {
            "as": "PartialObjectMetadataList",
            "g": "meta.k8s.io",
            "v": "v1",
        }:
            return True
    return False


def _metadata_item(obj: Obj) -> Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": META_VERSION, "metadata": meta(obj)}

"""The three patch types of the API server: JSON merge, JSON patch and strategic merge.

- JSON merge patch: RFC 7386 (a null deletes a key, lists are replaced).
- JSON patch: RFC 6902 (add, remove, replace, move, copy, test; JSON pointers).
- Strategic merge patch (`k8s.io/apimachinery/pkg/util/strategicpatch`): like a merge patch,
  but the lists Kubernetes declares with `patchStrategy: merge` are merged by their
  `patchMergeKey` (containers and env by `name`, volumeMounts by `mountPath`, conditions by
  `type` ...), `finalizers` merged as a set, and the directives `$patch: replace|delete`,
  `$retainKeys`, `$deleteFromPrimitiveList/<f>` and `$setElementOrder/<f>` honoured. Lists
  without a strategy (`taints`, `tolerations`, `command`, `args`) are replaced whole. The same
  function applies Argo's `podSpecPatch` (`ApplyPodSpecPatch` in workflow/util/util.go).

A PATCH request's content type picks one (`check_patch_type`, `patcher`): strategic merge on a
custom resource → 415 (the apiserver's patch handler for CRDs), a list sent as a merge patch
→ 422 "couldn't get version/kind", an object sent as a JSON patch → 400, a patch that cannot
be applied → 422.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from tests.sim import status
from tests.sim.resources import ResourceInfo

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"

# patchMergeKey of the lists with patchStrategy "merge" in the core API types, by field name.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "schedulingGates": "name",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "addresses": "type",
}
# Lists of scalars with patchStrategy "merge": merged as sets.
SET_LISTS = {"finalizers"}


class PatchError(ValueError):
    """A patch that cannot be applied (the server answers 422)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise PatchError(f"doc is missing path: /{'/'.join(parts)}")
    return node, parts[-1]


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise PatchError(f"doc is missing path: {path}")


def _remove(doc: Any, path: str) -> Any:
    parent, last = _parent(doc, _pointer(path))
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise PatchError(f"unable to remove nonexistent key: {last}: missing value")


def _add(doc: Any, path: str, value: Any, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"replace operation does not apply: doc is missing key: {path}")
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise PatchError(f"index out of bounds: {path}")
    else:
        raise PatchError(f"doc is missing path: {path}")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch; PatchError when an operation does not apply."""
    if not isinstance(operations, list):
        raise TypeError("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(target)
    for op in operations:
        kind, path = op.get("op"), op.get("path", "")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op.get("value")), replace=True)
        elif kind == "move":
            doc = _add(doc, path, _remove(doc, op["from"]))
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op["from"])))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}")
    return doc


def _merge_list(field: str, target: list[Any], patch: list[Any]) -> list[Any]:
    if patch and isinstance(patch[0], dict) and patch[0].get("$patch") == "replace":
        return copy.deepcopy(patch[1:])
    if field in SET_LISTS:
        out = list(target)
        out.extend(v for v in patch if v not in out)
        return out
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(item, dict) for item in patch):
        return copy.deepcopy(patch)
    out = [copy.deepcopy(item) for item in target]
    for item in patch:
        index = next(
            (i for i, t in enumerate(out) if isinstance(t, dict) and t.get(key) == item.get(key)),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                out.pop(index)
        elif index is None:
            out.append(strategic_merge({}, item))
        else:
            out[index] = strategic_merge(out[index], item)
    return out


def strategic_merge(target: Any, patch: Any) -> Any:
    """A strategic merge patch of `target` (see the module docstring)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "delete":
        return None
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _merge_list(key, result[key], value)
        elif isinstance(value, list):
            result[key] = _merge_list(key, [], value)
        else:
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def check_patch_type(info: ResourceInfo, content_type: str) -> None:
    """415 for a patch type the resource does not take (strategic merge on a custom resource;
    server-side apply, not simulated)."""
    accepted = [JSON_PATCH, MERGE_PATCH, APPLY] + ([] if info.custom else [STRATEGIC])
    if content_type not in (JSON_PATCH, MERGE_PATCH, STRATEGIC) or content_type not in accepted:
        raise status.unsupported_media_type(accepted)


def patcher(
    info: ResourceInfo, name: str, content_type: str, body: Any
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The change a PATCH of `content_type` with `body` makes to a copy of the stored object
    (the errors as the server answers them)."""

    def change(current: dict[str, Any]) -> dict[str, Any]:
        try:
            if content_type == JSON_PATCH:
                return json_patch(current, body)
            if not isinstance(body, dict):
                raise status.invalid(
                    info,
                    "",
                    f'patch: Invalid value: "{json.dumps(body)}": couldn\'t get '
                    "version/kind; json parse error: json: cannot unmarshal array into Go "
                    'value of type struct { APIVersion string "json:\\"apiVersion,omitempty'
                    '\\""; Kind string "json:\\"kind,omitempty\\"" }',
                )
            if content_type == MERGE_PATCH:
                return merge_patch(current, body)
            return strategic_merge(current, body)
        except TypeError as error:
            raise status.bad_request(str(error)) from error
        except PatchError as error:
            raise status.invalid(info, name, f"patch: {error}") from error

    return change

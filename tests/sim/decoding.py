"""How the simulated API server decodes a written object under `fieldValidation`.

A write asks `Strict`, `Warn` (the server's default since 1.27) or `Ignore`
(`validation_mode`, 422 for another value). Decoding (`decode`) checks the object against its
schema (`tests.sim.schemas`): an unknown field is refused under `Strict`, dropped with a
warning under `Warn`, dropped silently under `Ignore`; a value of the wrong type, a missing
required field and a malformed quantity are refused whatever was asked.
"""

from __future__ import annotations

from typing import Any

from tests.sim import status
from tests.sim.field_rules import Problem
from tests.sim.pod_rules import quantity_error
from tests.sim.resources import ResourceInfo
from tests.sim.schemas import field_errors
from tests.sim.status import ApiError

STRICT, WARN, IGNORE = "Strict", "Warn", "Ignore"
"""The values of `fieldValidation` (`Warn` is the server's default since 1.27)."""


def validation_mode(params: dict[str, str], options: str) -> str:
    """`fieldValidation` of a write (Warn when not given, as the server defaults it); 422 for
    a value it does not know (`options`: `CreateOptions`, `UpdateOptions`, `PatchOptions`)."""
    mode = params.get("fieldValidation") or WARN
    if mode not in (IGNORE, STRICT, WARN):
        problem = Problem(
            "NotSupported",
            "fieldValidation",
            mode,
            'supported values: "Ignore", "Strict", "Warn"',
        )
        raise ApiError(
            422,
            "Invalid",
            f'{options}.meta.k8s.io "" is invalid: {problem.text()}',
            {"kind": options, "group": "meta.k8s.io", "causes": [problem.cause()]},
        )
    return mode


def decode(
    info: ResourceInfo,
    obj: dict[str, Any],
    patch: str | None = None,
    *,
    validation: str = STRICT,
    warnings: list[str] | None = None,
) -> None:
    """Decode an object as the API server does under `fieldValidation` (`validation`):
    `Strict` refuses unknown fields (`status.refused_fields`), `Warn` (the server's
    default) drops each with a warning, `Ignore` drops them silently. Values of the
    wrong type and missing fields are refused whatever it asks; so is a malformed
    quantity (a decoding error, 400)."""
    name = obj.setdefault("metadata", {}).get("name") or ""
    errors = field_errors(obj)
    if errors:
        unknown = [e for e in errors if e.unknown]
        if validation == STRICT or len(unknown) < len(errors):
            raise status.refused_fields(
                info,
                name,
                errors if validation == STRICT else [e for e in errors if not e.unknown],
                patch,
            )
        for error in unknown:
            _drop(obj, error.parts)
            if warnings is not None and validation == WARN:
                warnings.append(f'unknown field "{error.path}"')
    broken = quantity_error(info, obj)
    if broken is not None:
        raise status.bad_request(
            f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: ' + broken
        )


def _drop(obj: Any, parts: tuple[str | int, ...]) -> None:
    """Remove the field at `parts` (keys and indices) from `obj`, if it is there."""
    *parents, last = parts
    for part in parents:
        obj = obj[int(part)] if isinstance(obj, list) else obj.get(part)
        if obj is None:
            return
    if isinstance(obj, dict):
        obj.pop(last, None)

"""Errors of the simulated API server, answered as v1 `Status` bodies.

The messages and reasons follow `k8s.io/apimachinery/pkg/api/errors` (NewNotFound,
NewAlreadyExists, NewConflict, NewInvalid, NewBadRequest, NewGone ...), so a client that
parses `reason` or `code` (as the `kubernetes` client's ApiException does) sees what a real
server sends.
"""

from __future__ import annotations

from typing import Any

from tests.sim.field_rules import Problem
from tests.sim.resources import ResourceInfo
from tests.sim.schemas import FieldError

CONFLICT_HINT = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


class ApiError(Exception):
    """A failure the server answers with a Status body and an HTTP code."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def body(self) -> dict[str, Any]:
        """The Status object of this error."""
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            status["details"] = self.details
        return status


def _details(info: ResourceInfo, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": info.plural}
    if info.group:
        details["group"] = info.group
    return details


def not_found(info: ResourceInfo, name: str) -> ApiError:
    """404: `pods "x" not found`."""
    return ApiError(404, "NotFound", f'{info.qualified} "{name}" not found', _details(info, name))


def already_exists(info: ResourceInfo, name: str) -> ApiError:
    """409: `pods "x" already exists`."""
    return ApiError(
        409, "AlreadyExists", f'{info.qualified} "{name}" already exists', _details(info, name)
    )


def conflict(info: ResourceInfo, name: str, why: str = CONFLICT_HINT) -> ApiError:
    """409: a write whose resourceVersion (or precondition) is not the stored one."""
    message = f'Operation cannot be fulfilled on {info.qualified} "{name}": {why}'
    return ApiError(409, "Conflict", message, _details(info, name))


def invalid(info: ResourceInfo, name: str, cause: str) -> ApiError:
    """422: `<Kind>.<group> "x" is invalid: <cause>`."""
    kind = f"{info.kind}.{info.group}" if info.group else info.kind
    return ApiError(
        422, "Invalid", f'{kind} "{name}" is invalid: {cause}', {**_details(info, name)}
    )


def invalid_object(info: ResourceInfo, name: str, problems: list[Problem]) -> ApiError:
    """422 as `errors.NewInvalid` makes it: `Pod "x" is invalid: <field>: <why>`, several
    problems as `[one, two]` (each text once), a cause per problem, `details.kind` the kind."""
    texts = list(dict.fromkeys(p.text() for p in problems))
    qualified = f"{info.kind}.{info.group}" if info.group else info.kind
    message = texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"
    details: dict[str, Any] = {"name": name, "kind": info.kind}
    if info.group:
        details["group"] = info.group
    details["causes"] = [p.cause() for p in problems]
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {message}', details)


def _unknown(errors: list[FieldError]) -> str:
    return "strict decoding error: " + ", ".join(f'unknown field "{e.path}"' for e in errors)


def refused_fields(
    info: ResourceInfo, name: str, errors: list[FieldError], patch: str | None = None
) -> ApiError:
    """What `fieldValidation=Strict` answers for an object with unknown or mistyped fields.

    Unknown fields of a created or replaced object: 400 `Pod in version "v1" cannot be
    handled as a Pod: strict decoding error: unknown field "spec.x"`; of a patched one: 422
    `... is invalid: patch: Invalid value: "<patch>": strict decoding error: ...`. Values of
    the wrong type or out of range: 422 `... is invalid: <path>: Invalid value: ...`, with a
    cause per field.
    """
    unknown = [e for e in errors if e.unknown]
    if unknown and patch is None:
        return bad_request(
            f'{info.kind} in version "{info.version}" cannot be handled as a {info.kind}: '
            + _unknown(unknown)
        )
    if unknown:
        error = invalid(info, name, f'patch: Invalid value: "{patch}": {_unknown(unknown)}')
    else:
        causes = [f"{e.path}: {e.message}" for e in errors]
        error = invalid(info, name, causes[0] if len(causes) == 1 else f"[{', '.join(causes)}]")
    if error.details is not None:
        error.details["causes"] = [
            {
                "reason": "FieldValueUnknown"
                if e.unknown
                else "FieldValueRequired"
                if e.message == "Required value"
                else "FieldValueInvalid",
                "message": e.message,
                "field": e.path,
            }
            for e in errors
        ]
    return error


def bad_request(message: str) -> ApiError:
    """400 BadRequest."""
    return ApiError(400, "BadRequest", message)


def forbidden(info: ResourceInfo, name: str, why: str) -> ApiError:
    """403: `pods "x" is forbidden: <why>` (e.g. an unknown priority class)."""
    return ApiError(
        403, "Forbidden", f'{info.qualified} "{name}" is forbidden: {why}', _details(info, name)
    )


def gone(message: str) -> ApiError:
    """410 Expired: a watch from a resourceVersion older than the kept history."""
    return ApiError(410, "Expired", message)


def unsupported_media_type(accepted: list[str]) -> ApiError:
    """415: a patch type this resource does not take (strategic merge on a custom object)."""
    message = (
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}"
    )
    return ApiError(415, "UnsupportedMediaType", message)


def method_not_allowed(verb: str) -> ApiError:
    """405: a verb the resource does not serve."""
    return ApiError(
        405,
        "MethodNotAllowed",
        f"the server does not allow this method on the requested resource ({verb})",
    )


def unknown_path() -> ApiError:
    """404 for a path the server does not serve."""
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def success(info: ResourceInfo, name: str, uid: str) -> dict[str, Any]:
    """The Status answered for a delete of a resource that returns no object."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {**_details(info, name), "uid": uid},
    }

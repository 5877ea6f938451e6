"""One shape for every error of the API: `{"detail": ..., "code": ...}` plus what helps fix it.

Domain exceptions map to statuses here, so views never translate them one by one:
unknown run → 404, someone else's run to change → 403, a run in the wrong state → 409, an
invalid workflow → 400 with every error and its location (`workflow_refused` for text past a
limit of `runs.workflow_text`: too large, too deep, not UTF-8…), a refused submission, plan or
upload → 400, an upload too large → 413, not an archive → 415, an identity past its
submission limits → 429 with Retry-After.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from runs.crates.reading import CrateRefused
from runs.crates.validation import CrateUnreadable
from runs.planner import PlanRefused
from runs.refusals import SubmissionThrottled
from runs.selectors.outputs import OutputNotFound, RangeNotSatisfiable
from runs.selectors.runs_list import BadFilter
from runs.services.runs import NotAllowed, RunConflict, RunNotFound
from runs.services.snapshot_records import SnapshotNotInStore
from runs.services.submission import SubmissionRefused
from runs.services.uploads import UnsupportedArchive, UploadRefused, UploadTooLarge
from runs.snapshots import SnapshotRefused
from runs.workflow import WorkflowError, WorkflowInvalid
from runs.workflow_limits import WorkflowRefused


def workflow_error(error: WorkflowError) -> dict[str, Any]:
    """One error of a workflow as the API shows it (also in validation results)."""
    return {
        "loc": error.loc,
        "message": error.message,
        "task": error.task,
        "line": error.line,
        "text": str(error),
    }


_MAPPED: list[tuple[type[Exception], int, str]] = [
    (RunNotFound, status.HTTP_404_NOT_FOUND, "run_not_found"),
    (OutputNotFound, status.HTTP_404_NOT_FOUND, "output_not_found"),
    (NotAllowed, status.HTTP_403_FORBIDDEN, "not_yours"),
    (RunConflict, status.HTTP_409_CONFLICT, "conflict"),
    (UploadTooLarge, status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, "too_large"),
    (UnsupportedArchive, status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, "unsupported_archive"),
    (UploadRefused, status.HTTP_400_BAD_REQUEST, "upload_refused"),
    (CrateUnreadable, status.HTTP_400_BAD_REQUEST, "crate_refused"),
    (CrateRefused, status.HTTP_400_BAD_REQUEST, "crate_refused"),
    (SnapshotNotInStore, status.HTTP_404_NOT_FOUND, "snapshot_not_found"),
    (SnapshotRefused, status.HTTP_400_BAD_REQUEST, "snapshot_refused"),
    (SubmissionRefused, status.HTTP_400_BAD_REQUEST, "submission_refused"),
    (PlanRefused, status.HTTP_400_BAD_REQUEST, "plan_refused"),
    (BadFilter, status.HTTP_400_BAD_REQUEST, "invalid"),
    (RangeNotSatisfiable, status.HTTP_416_REQUESTED_RANGE_NOT_SATISFIABLE, "range"),
]


class InvalidInput(exceptions.APIException):
    """Bad input the view found itself (a header, a parameter)."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid"


def _fields_text(detail: Any, prefix: str = "") -> list[str]:
    if isinstance(detail, dict):
        out = []
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            out.extend(_fields_text(value, "" if key == "non_field_errors" else name))
        return out
    if isinstance(detail, list):
        return [line for item in detail for line in _fields_text(item, prefix)]
    return [f"{prefix}: {detail}" if prefix else str(detail)]


class TooManySubmissions(exceptions.Throttled):
    default_code = "too_many_submissions"


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, with the domain's exceptions mapped and every body of one shape."""
    if isinstance(exc, SubmissionThrottled):  # 429 with Retry-After, by DRF's handler
        exc = TooManySubmissions(wait=exc.retry_after_s, detail=str(exc))
    if isinstance(exc, WorkflowInvalid):
        errors = [workflow_error(e) for e in exc.errors]
        refused = isinstance(exc, WorkflowRefused)
        body = {
            "detail": ("the workflow text is refused: " if refused else "")
            + f"the workflow has {len(errors)} error(s): "
            + "; ".join(e["text"] for e in errors[:5]),
            "code": "workflow_refused" if refused else "workflow_invalid",
            "errors": errors,
        }
        return Response(body, status=status.HTTP_400_BAD_REQUEST)
    for kind, code_status, code in _MAPPED:
        if isinstance(exc, kind):
            return Response({"detail": str(exc), "code": code}, status=code_status)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or None)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif isinstance(exc, exceptions.UnsupportedMediaType):
        media = getattr(context.get("request"), "content_type", "") or "none"
        exc = exceptions.UnsupportedMediaType(
            media, detail=f"a body of type {media!r} is not read here: send application/json"
        )
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        lines = _fields_text(exc.detail)
        response.data = {
            "detail": "; ".join(lines) or "invalid input",
            "code": "invalid",
            "fields": exc.detail if isinstance(exc.detail, dict) else {},
        }
    elif isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        response.data = {
            "detail": "; ".join(_fields_text(exc.detail)),
            "code": codes if isinstance(codes, str) else "error",
        }
    return response

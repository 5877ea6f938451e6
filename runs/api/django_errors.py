"""JSON for what Django answers itself under /api/, before or around DRF's views.

Django turns some faults into pages of its own: a request it finds suspicious (a Host outside
ALLOWED_HOSTS, too many fields, a body over DATA_UPLOAD_MAX_MEMORY_SIZE) into 400, an
exception no view handled into 500. Under /api/ those answers are JSON in the API's error shape
(`{"detail", "code"}`); elsewhere they stay Django's pages. The URLconf names the handlers
(`handler400`, `handler403`, `handler404`, `handler500`) and `ApiErrorsMiddleware` answers a
view's unhandled exception itself, so its log line carries the id the client is given.
"""

from __future__ import annotations

import logging
import secrets
import sys
from types import TracebackType
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.core.handlers.wsgi import WSGIRequest
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin
from django.views import defaults

from runs.selectors.disk import disk_of_failure, is_disk_full

log = logging.getLogger("simrun.api")

API_PREFIX = "/api/"
ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def error(status: int, code: str, detail: str, **more: Any) -> JsonResponse:
    """An answer in the API's error shape."""
    return JsonResponse({"detail": detail, "code": code, **more}, status=status)


def disk_full_response(exc: BaseException) -> JsonResponse:
    """507 naming the full disk: a write refused for want of space is no fault to look up by
    an id (whose log line could not be written on that disk either)."""
    full = disk_of_failure(exc)
    return error(
        507,
        "disk_full",
        f"{full.message()}; nothing was changed: free space there and try again",
        disk=full.as_json(),
    )


def server_error_response(request: HttpRequest, exc_info: ExcInfo | None) -> JsonResponse:
    """500 with an id; the fault is logged once, with its traceback, under the same id. A
    full disk is 507, naming it (`disk_full_response`)."""
    if exc_info is not None and is_disk_full(exc_info[1]):
        return disk_full_response(exc_info[1])
    error_id = secrets.token_hex(6)
    log.error("server error %s: %s %s", error_id, request.method, request.path, exc_info=exc_info)
    return error(
        500,
        "server_error",
        f"the service failed on this request; tell its operator the id {error_id}",
        id=error_id,
    )


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400: a SuspiciousOperation of Django (RequestDataTooBig is 413)."""
    if not is_api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return error(
            413,
            "too_large",
            f"the body is larger than the limit of {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)",
        )
    reason = str(exception) if isinstance(exception, SuspiciousOperation) else ""
    return error(400, "bad_request", f"the request was refused: {reason or 'malformed'}")


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler403."""
    if not is_api(request):
        return defaults.permission_denied(request, exception)
    return error(403, "permission_denied", str(exception) or "not allowed")


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404 (the API's own catch-all route answers first; this is the safety net)."""
    if not is_api(request):
        return defaults.page_not_found(request, exception)
    return error(404, "no_route", f"no route {request.path} (see /api/docs/)")


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: a fault outside any view (a middleware); called while it is handled."""
    info = sys.exc_info()
    if not is_api(request):
        if info[1] is not None and is_disk_full(info[1]):
            text = f"{disk_of_failure(info[1]).message()}; free space there and try again\n"
            return HttpResponse(text, status=507, content_type="text/plain")
        return defaults.server_error(request)
    return server_error_response(request, info if info[0] is not None else None)


class ApiErrorsMiddleware(MiddlewareMixin):
    """Under /api/: a view's unhandled exception becomes the 500 of `server_error_response`,
    and a chunked body a WSGI server hands over without Content-Length is refused with 411.

    Django reads a WSGI body only up to CONTENT_LENGTH, so such a body would be taken for an
    empty one. The service's ASGI application (simrun_site.dispatch) gives every chunked body
    bound for WSGI its length first; under ASGI Django reads the body whole by itself.
    """

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if (
            is_api(request)
            and isinstance(request, WSGIRequest)
            and not request.META.get("CONTENT_LENGTH")
            and request.META.get("HTTP_TRANSFER_ENCODING")
        ):
            return error(
                411,
                "length_required",
                "a body without Content-Length cannot be read here; send its length",
            )
        return None

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_api(request) or isinstance(
            exception, (Http404, PermissionDenied, SuspiciousOperation)
        ):
            return None  # Django answers these through the handlers above
        return server_error_response(request, (type(exception), exception, exception.__traceback__))

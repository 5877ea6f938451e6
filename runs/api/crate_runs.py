"""A run made again from a Workflow Run RO-Crate: `POST /api/runs/from_crate/`, the crate's zip
as the body (docs/provenance.md).

The body is an upload like a snapshot's: refused with 413 before a byte is read when announced
larger than SIMRUN_MAX_UPLOAD_BYTES, spooled to the store's upload directory with that limit,
then checked and run by `runs.services.crate_runs`. A refused crate changes nothing.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from runs.api.auth import identity_of
from runs.api.base import ApiView
from runs.api.errors import InvalidInput
from runs.api.runs import IDEMPOTENCY_KEY, run_detail
from runs.api.serializers.errors import ErrorSerializer
from runs.api.serializers.runs import RunDetailSerializer
from runs.api.serializers.workflows import CrateRunQuerySerializer
from runs.api.snapshots import upload_body, upload_limits
from runs.selectors.runs_list import get_run
from runs.services.crate_runs import submit_crate
from runs.services.uploads import ZIP, UnsupportedArchive, UploadTooLarge, archive_kind, spool
from runs.store import store

E = ErrorSerializer


class CrateRunView(ApiView):
    """Run a crate again."""

    @extend_schema(
        operation_id="runs_from_crate",
        parameters=[
            CrateRunQuerySerializer,
            OpenApiParameter(
                IDEMPOTENCY_KEY,
                str,
                OpenApiParameter.HEADER,
                description="A retried submission with the same key returns the same run.",
            ),
        ],
        request={"application/zip": OpenApiTypes.BINARY},
        responses={
            201: RunDetailSerializer,
            200: OpenApiResponse(RunDetailSerializer, description="The run of this key."),
            400: E,
            401: E,
            413: E,
            415: E,
            429: E,
        },
    )
    def post(self, request: Request) -> Response:
        """Check a crate's zip (the run profiles, every file's digest, its snapshots, its task
        types installed here), make its workflow, snapshots and settings again and submit the
        run, answered `submitting`; its environment is built from the crate's lock."""
        limits = upload_limits()
        length = request.META.get("CONTENT_LENGTH") or ""
        if length and (not length.isdigit() or int(length) > limits.max_bytes):
            if not length.isdigit():
                raise InvalidInput("Content-Length: not a number")
            raise UploadTooLarge(
                f"the crate ({length} bytes) is larger than the upload limit of "
                f"{limits.max_bytes} bytes (SIMRUN_MAX_UPLOAD_BYTES)"
            )
        if archive_kind(request.content_type or "") != ZIP:
            raise UnsupportedArchive("Content-Type: send the crate as application/zip")
        key = request.headers.get(IDEMPOTENCY_KEY) or None
        if key is not None and not 1 <= len(key) <= 128:
            raise InvalidInput(f"{IDEMPOTENCY_KEY}: 1 to 128 characters")
        query = CrateRunQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        identity = identity_of(request)
        paths = store()
        archive = spool(upload_body(request), directory=paths.uploads, limit=limits.max_bytes)
        try:
            run, created = submit_crate(
                identity=identity,
                archive=archive,
                limits=limits,
                idempotency_key=key,
                **query.validated_data,
            )
        finally:
            archive.unlink(missing_ok=True)
        detail = run_detail(get_run(run.id), identity)
        return Response(
            RunDetailSerializer(detail).data,
            status=201 if created else 200,
            headers={"Location": f"/api/runs/{run.id}/"},
        )

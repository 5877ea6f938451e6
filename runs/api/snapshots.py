"""Snapshots of sources: upload an archive, register one written into a mounted store, list.

An upload is the raw body (`application/x-tar`, `application/gzip` for tar.gz, or
`application/zip`) with the provenance in the query (`name`, `source_path`, `git_remote`,
`git_commit`, `git_dirty`). A body announced larger than SIMRUN_MAX_UPLOAD_BYTES is refused
with 413 before a byte is read; one that turns out larger while it is read, too.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from runs.api.auth import identity_of
from runs.api.base import ApiView
from runs.api.errors import InvalidInput
from runs.api.serializers.errors import ErrorSerializer
from runs.api.serializers.snapshots import (
    ProvenanceQuerySerializer,
    RegisterSnapshotSerializer,
    SnapshotSerializer,
)
from runs.selectors.snapshots import newest_snapshots, snapshot_of
from runs.services.snapshot_records import record_snapshot, register_stored_snapshot
from runs.services.uploads import (
    DOCUMENTED_TYPES,
    UploadLimits,
    UploadTooLarge,
    archive_kind,
    store_upload,
)
from runs.snapshots import Provenance
from runs.store import store

E = ErrorSerializer
LISTED = 100


@dataclass(frozen=True)
class _Body:
    """The request body as a stream of at most its Content-Length (DRF never parses it)."""

    request: Request

    def read(self, size: int = -1, /) -> bytes:
        return self.request._request.read(size)


def upload_body(request: Request) -> _Body:
    """The body of an upload as a stream (read once, never parsed by DRF)."""
    return _Body(request)


def upload_limits() -> UploadLimits:
    return UploadLimits(
        max_bytes=settings.SIMRUN_MAX_UPLOAD_BYTES,
        max_files=settings.SIMRUN_UPLOAD_MAX_FILES,
        max_unpacked_bytes=settings.SIMRUN_UPLOAD_MAX_UNPACKED_BYTES,
    )


def _provenance(data: dict[str, object]) -> Provenance:
    return Provenance(
        source_path=str(data["source_path"]),
        git_remote=str(data["git_remote"]),
        git_commit=str(data["git_commit"]),
        git_dirty=data["git_dirty"] if isinstance(data["git_dirty"], bool) else None,
    )


class SnapshotListView(ApiView):
    """The newest snapshots; POST uploads one (S15)."""

    @extend_schema(responses={200: SnapshotSerializer(many=True), 401: E, 429: E})
    def get(self, request: Request) -> Response:
        return Response(SnapshotSerializer(newest_snapshots(LISTED), many=True).data)

    @extend_schema(
        parameters=[ProvenanceQuerySerializer],
        request={media: OpenApiTypes.BINARY for media in DOCUMENTED_TYPES},
        responses={
            201: SnapshotSerializer,
            200: OpenApiResponse(SnapshotSerializer, description="These sources were stored."),
            400: E,
            401: E,
            413: E,
            415: E,
            429: E,
        },
    )
    def post(self, request: Request) -> Response:
        """Upload an archive of sources; it becomes a snapshot (files shared by content)."""
        limits = upload_limits()
        length = request.META.get("CONTENT_LENGTH") or ""
        if length and (not length.isdigit() or int(length) > limits.max_bytes):
            if not length.isdigit():
                raise InvalidInput("Content-Length: not a number")
            raise UploadTooLarge(
                f"the upload ({length} bytes) is larger than the limit of {limits.max_bytes} bytes"
            )
        archive_kind(request.content_type or "")
        query = ProvenanceQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        stored = store_upload(
            store(), _Body(request), content_type=request.content_type, limits=limits
        )
        snapshot, created = record_snapshot(
            digest=stored.digest,
            files=stored.files,
            size=stored.bytes,
            provenance=_provenance(query.validated_data),
            name=query.validated_data["name"],
            identity=identity_of(request),
        )
        return Response(SnapshotSerializer(snapshot).data, status=201 if created else 200)


class SnapshotRegisterView(ApiView):
    """Record a snapshot the client wrote into the store (SIMRUN_STORE mounted)."""

    @extend_schema(
        request=RegisterSnapshotSerializer,
        responses={
            201: SnapshotSerializer,
            200: SnapshotSerializer,
            400: E,
            401: E,
            404: OpenApiResponse(E, description="No such snapshot in the store."),
            429: E,
        },
    )
    def post(self, request: Request) -> Response:
        body = RegisterSnapshotSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        snapshot, created = register_stored_snapshot(
            digest=body.validated_data["digest"],
            provenance=_provenance(body.validated_data),
            name=body.validated_data["name"],
            identity=identity_of(request),
        )
        return Response(SnapshotSerializer(snapshot).data, status=201 if created else 200)


class SnapshotView(ApiView):
    """One snapshot by digest."""

    @extend_schema(responses={200: SnapshotSerializer, 401: E, 404: E, 429: E})
    def get(self, request: Request, digest: str) -> Response:
        snapshot = snapshot_of(digest)
        if snapshot is None:
            return Response({"detail": f"no snapshot {digest!r}", "code": "not_found"}, status=404)
        return Response(SnapshotSerializer(snapshot).data)

"""Housekeeping and overviews: cleanup of ended runs, store usage, runs compared (S12-S14)."""

from __future__ import annotations

import re

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from runs.api.auth import identity_of
from runs.api.base import ApiView
from runs.api.errors import InvalidInput
from runs.api.serializers.errors import ErrorSerializer
from runs.api.serializers.fields import RUN_ID
from runs.api.serializers.operations import (
    CleanupRequestSerializer,
    CleanupResultSerializer,
    ComparisonSerializer,
    UsageSerializer,
)
from runs.selectors.compare import MAX_RUNS, compare_runs
from runs.selectors.usage import store_usage
from runs.services.cleanup import cleanup_runs

E = ErrorSerializer


class CleanupView(ApiView):
    """Remove ended runs by age, group, failed only; `dry_run` lists what would go (S12).

    The owner cleans every run; a person their own and their agents'. The runs are marked
    deleting and the answer (202) names them; a worker removes their files and records.
    """

    @extend_schema(
        request=CleanupRequestSerializer,
        responses={
            200: CleanupResultSerializer,
            202: CleanupResultSerializer,
            400: E,
            401: E,
            429: E,
        },
    )
    def post(self, request: Request) -> Response:
        body = CleanupRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        result = cleanup_runs(
            identity=identity_of(request),
            older_than_days=data["older_than_days"],
            group=data.get("group") or None,
            failed_only=data["failed_only"],
            dry_run=data["dry_run"],
        )
        status = 200 if result.dry_run else 202
        return Response(CleanupResultSerializer(result).data, status=status)


class UsageView(ApiView):
    """Bytes of the run store per run and per group; hard-linked files count once (S13)."""

    @extend_schema(responses={200: UsageSerializer, 401: E, 429: E})
    def get(self, request: Request) -> Response:
        return Response(UsageSerializer(store_usage()).data)


class CompareView(ApiView):
    """Two or more runs side by side: settings, sources, environment, durations, resources."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "runs",
                {
                    "type": "array",
                    "items": {"type": "string", "pattern": RUN_ID},
                    "minItems": 2,
                    "maxItems": MAX_RUNS,
                    "uniqueItems": True,
                },
                required=True,
                style="form",
                explode=False,
                description=f"2 to {MAX_RUNS} run ids, comma-separated, each once.",
            )
        ],
        responses={200: ComparisonSerializer, 400: E, 401: E, 404: E, 429: E},
    )
    def get(self, request: Request) -> Response:
        ids = [r.strip() for r in request.query_params.get("runs", "").split(",") if r.strip()]
        wrong = [r for r in ids if not re.fullmatch(RUN_ID, r)]
        if wrong:  # a NUL, say, would reach the database
            raise InvalidInput(
                f"runs: {wrong[0]!r} is no run id (1 to 24 lowercase letters and digits)"
            )
        try:
            comparison = compare_runs(ids)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        return Response(ComparisonSerializer(comparison).data)

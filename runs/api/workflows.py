"""Routes about workflows before they run: validate, estimate, explain reuse, the task types
(S4, S5, S11)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from runs.api.auth import identity_of
from runs.api.base import ApiView
from runs.api.errors import workflow_error
from runs.api.serializers.errors import ErrorSerializer
from runs.api.serializers.workflows import (
    EstimateSerializer,
    ReusePreviewRequestSerializer,
    ReusePreviewSerializer,
    TaskEstimateSerializer,
    TaskTypeSerializer,
    ValidateSerializer,
    ValidationResultSerializer,
    WhoAmISerializer,
)
from runs.priorities import tier_of
from runs.selectors.reuse_preview import preview_reuse
from runs.selectors.task_estimates import estimate_workflow, types_for_sources
from runs.task_types import registry
from runs.validation import load, load_data
from runs.workflow import Workflow, WorkflowInvalid
from runs.workflow_limits import WorkflowRefused

ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 429: ErrorSerializer}


def parse_workflow(value: str | dict[str, Any], sources: list[str] | None = None) -> Workflow:
    """A valid workflow from its text (errors with lines) or object, checked with the types
    of the model's environment (the first of `sources`; the service's own until it is
    built); WorkflowInvalid else."""
    types = types_for_sources(sources or [])
    return load(value, types=types) if isinstance(value, str) else load_data(value, types=types)


class WhoAmIView(ApiView):
    """The identity of the token: its name, kind and the priority tier of its runs (S2)."""

    @extend_schema(responses={200: WhoAmISerializer, 401: ErrorSerializer, 429: ErrorSerializer})
    def get(self, request: Request) -> Response:
        identity = identity_of(request)
        return Response(
            {
                "name": identity.name,
                "kind": identity.kind,
                "tier": tier_of(identity.kind),
                "acts_for": identity.acts_for.name if identity.acts_for else None,
            }
        )


class ValidateView(ApiView):
    """Every error of a workflow at once, each with its location (S4); valid: no errors.

    A text past a limit (size, depth, values, not UTF-8…) is refused with 400 instead."""

    @extend_schema(
        request=ValidateSerializer, responses={200: ValidationResultSerializer, **ERRORS}
    )
    def post(self, request: Request) -> Response:
        body = ValidateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            parse_workflow(body.validated_data["workflow"], body.validated_data.get("sources"))
        except WorkflowRefused:
            raise  # past a limit: a bad request (400), not a validation result
        except WorkflowInvalid as exc:
            return Response({"valid": False, "errors": [workflow_error(e) for e in exc.errors]})
        return Response({"valid": True, "errors": []})


class EstimateView(ApiView):
    """Resources, plan and expected seconds of every task, on the servers as they are (S5)."""

    @extend_schema(
        request=EstimateSerializer, responses={200: TaskEstimateSerializer(many=True), **ERRORS}
    )
    def post(self, request: Request) -> Response:
        body = EstimateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        estimates = estimate_workflow(
            identity=identity_of(request),
            workflow=data["workflow"],
            sources=data["sources"],
            split=data["split"],
            reserve=data["reserve"],
        )
        return Response(TaskEstimateSerializer(estimates, many=True).data)


class ExplainReuseView(ApiView):
    """What the workflow would reuse if submitted now, per task, and why not more: the first
    part of its key that differs from the run it is compared with (the resumed run, else the
    newest earlier run of the workflow's name). Submits nothing."""

    @extend_schema(
        request=ReusePreviewRequestSerializer, responses={200: ReusePreviewSerializer, **ERRORS}
    )
    def post(self, request: Request) -> Response:
        body = ReusePreviewRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        preview = preview_reuse(
            identity=identity_of(request),
            workflow=data["workflow"],
            sources=data["sources"],
            reuse=data["reuse"],
            resume_from=data["resume_from"],
        )
        return Response(
            ReusePreviewSerializer(
                {
                    "reused": preview.reused,
                    "units": preview.units,
                    "text": preview.text,
                    "tasks": preview.tasks,
                }
            ).data
        )


class TaskTypeListView(ApiView):
    """The task types of the installed plugins, with the JSON Schema of their settings (S11)."""

    @extend_schema(
        responses={200: TaskTypeSerializer(many=True), 401: ErrorSerializer, 429: ErrorSerializer}
    )
    def get(self, request: Request) -> Response:
        types = [info.describe() for _, info in registry().items()]
        return Response(TaskTypeSerializer(types, many=True).data)


class TaskTypeView(ApiView):
    """One task type."""

    @extend_schema(
        responses={
            200: TaskTypeSerializer,
            401: ErrorSerializer,
            404: ErrorSerializer,
            429: ErrorSerializer,
        }
    )
    def get(self, request: Request, name: str) -> Response:
        info = registry().get(name)
        if info is None:
            known = ", ".join(sorted(registry()))
            return Response(
                {"detail": f"no task type {name!r} (known: {known})", "code": "not_found"},
                status=404,
            )
        return Response(TaskTypeSerializer(info.describe()).data)

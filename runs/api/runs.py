"""Runs: list, submit, show, delete, and their verbs (cancel, tasks, workers, outputs, logs,
events).

Every identity of the lab reads every run. Cancelling and deleting are for the run's person
(and the agents acting for them) and the owner; anyone else gets 403 with a message naming
whose run it is. Not 404: the run is visible to them anyway, so hiding it would only confuse.
An unknown run is 404.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from django.http import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from runs.api.auth import identity_of
from runs.api.base import ApiViewSet
from runs.api.errors import InvalidInput
from runs.api.events import EVENT_ID, EventId, run_event_stream
from runs.api.log_follow import log_stream
from runs.api.renderers import AnyMediaRenderer, EventStreamRenderer, PlainTextRenderer
from runs.api.schema import PagedListSchema
from runs.api.serializers.errors import ErrorSerializer
from runs.api.serializers.runs import (
    LogEntrySerializer,
    OutputListingSerializer,
    RunDetailSerializer,
    RunListQuerySerializer,
    RunPageSerializer,
    ServerEventSerializer,
    TaskSerializer,
    WorkerSerializer,
)
from runs.api.serializers.workflows import SubmitSerializer
from runs.edge.responses import chunks_response, file_response
from runs.selectors.disk import installation_disk
from runs.selectors.heartbeat import controller_idle_s, late_after_s
from runs.selectors.logs import task_logs
from runs.selectors.outputs import byte_range, output_file, run_outputs
from runs.selectors.reuse import run_reuse
from runs.selectors.runs_list import get_run, list_runs, run_item
from runs.selectors.tasks import run_tasks
from runs.selectors.workers import task_workers
from runs.services.crates import exported_zip
from runs.services.runs import cancel_run, may_change, request_deletion
from runs.services.submission import create_run
from runs.workflow import TASK_ID

if TYPE_CHECKING:
    from runs.models import Identity, Run

IDEMPOTENCY_KEY = "Idempotency-Key"
E = ErrorSerializer
READ_ERRORS = {401: E, 404: E, 429: E}


def run_detail(run: Run, identity: Identity) -> dict[str, Any]:
    """A run with its tasks and whether `identity` may change it."""
    return {
        **asdict(run_item(run)),
        "workflow_name": run.workflow_name,
        "workflow": run.workflow,
        "sources": run.sources,
        "environment": run.environment,
        "reserve": run.reserve,
        "tasks": [asdict(t) for t in run_tasks(run)],
        "reuse": {**asdict(reuse := run_reuse(run)), "text": reuse.text},
        "from_crate": run.from_crate,
        "exports": run.exports,
        "may_change": may_change(identity, run),
        "controller_idle_s": controller_idle_s(),
        "controller_late_s": late_after_s(state=run.state),
        "disk": (full.as_json() if (full := installation_disk()) is not None else None),
    }


class TaskNotFound(NotFound):
    default_code = "task_not_found"


def _task_param(request: Request, run: Run, *, required: bool) -> str | None:
    """The task of `?task=` (empty: none given); 404 when the run has no such task."""
    task_id = request.query_params.get("task") or None
    if task_id is None and required:
        raise InvalidInput("task: give the task, e.g. ?task=scan")
    if task_id is not None and not any(t.task_id == task_id for t in run.tasks.all()):
        known = ", ".join(t.task_id for t in run.tasks.all())
        raise TaskNotFound(f"run {run.id} has no task {task_id!r} (tasks: {known})")
    return task_id


def _int_param(request: Request, name: str, low: int, high: int) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    if not value.isdigit() or not low <= int(value) <= high:
        raise InvalidInput(f"{name}: a whole number from {low} to {high}")
    return int(value)


def _flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name)
    if value not in (None, "", "true", "false"):  # empty: not given, as every filter
        raise InvalidInput(f"{name}: true or false")
    return value == "true"


TASK = OpenApiParameter(
    "task", str, description="One task's only (empty or left out: every task's)."
)
TASK_REQUIRED = OpenApiParameter(
    "task",
    {"type": "string", "pattern": TASK_ID},
    required=True,
    description="The task id (404 when the run has none of this id).",
)


class RunViewSet(ApiViewSet):
    """Runs of the lab."""

    lookup_value_regex = "[^/\x00]+"  # any id: an unknown one is a 404 of the API, in JSON
    schema = PagedListSchema()

    @extend_schema(
        operation_id="runs_list",
        parameters=[RunListQuerySerializer],
        responses={200: RunPageSerializer, 400: E, 401: E, 429: E},
    )
    def list(self, request: Request) -> Response:
        """Runs newest first; filters state (comma list, live, ended), group, owner; keyset
        pages (`cursor` = the `next_cursor` of the page before)."""
        query = RunListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        page = list_runs(**{k: v for k, v in query.validated_data.items() if v != ""})
        return Response(RunPageSerializer(page).data)

    @extend_schema(
        request=SubmitSerializer,
        parameters=[
            OpenApiParameter(
                IDEMPOTENCY_KEY,
                str,
                OpenApiParameter.HEADER,
                description="A retried submission with the same key returns the same run.",
            )
        ],
        responses={
            201: RunDetailSerializer,
            200: OpenApiResponse(RunDetailSerializer, description="The run of this key."),
            400: E,
            401: E,
            429: E,
        },
    )
    def create(self, request: Request) -> Response:
        """Submit a run: validated, resolved and planned now, answered `submitting` (S3); the
        environment and the workflow follow in the background."""
        identity = identity_of(request)
        key = request.headers.get(IDEMPOTENCY_KEY) or None
        if key is not None and not 1 <= len(key) <= 128:
            raise InvalidInput(f"{IDEMPOTENCY_KEY}: 1 to 128 characters")
        body = SubmitSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        run, created = create_run(
            identity=identity,
            workflow=data["workflow"],
            sources=data["sources"],
            group=data["group"],
            split=data["split"],
            reserve=data["reserve"],
            idempotency_key=key,
            reuse=data["reuse"],
            resume_from=data["resume_from"],
        )
        detail = run_detail(get_run(run.id), identity)
        return Response(
            RunDetailSerializer(detail).data,
            status=201 if created else 200,
            headers={"Location": f"/api/runs/{run.id}/"},
        )

    @extend_schema(responses={200: RunDetailSerializer, **READ_ERRORS})
    def retrieve(self, request: Request, pk: str) -> Response:
        """A run with its tasks."""
        detail = run_detail(get_run(pk), identity_of(request))
        return Response(RunDetailSerializer(detail).data)

    @extend_schema(responses={202: RunDetailSerializer, 403: E, 409: E, **READ_ERRORS})
    def destroy(self, request: Request, pk: str) -> Response:
        """Delete an ended run, its record and its files: answered at once with the run
        `pending: "deleting"`; a worker removes it (its event stream then says `deleted`)."""
        identity = identity_of(request)
        request_deletion(run_id=pk, identity=identity)
        return Response(RunDetailSerializer(run_detail(get_run(pk), identity)).data, status=202)

    @extend_schema(
        request=None, responses={200: RunDetailSerializer, 403: E, 409: E, **READ_ERRORS}
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        """Cancel a live run (C16): written cancelled at once, with `pending: "cancelling"`
        until a worker has cancelled its workflow, released its node and kept its logs."""
        identity = identity_of(request)
        cancel_run(run_id=pk, identity=identity)
        return Response(RunDetailSerializer(run_detail(get_run(pk), identity)).data)

    @extend_schema(responses={200: TaskSerializer(many=True), **READ_ERRORS})
    @action(detail=True, methods=["get"])
    def tasks(self, request: Request, pk: str) -> Response:
        """The tasks with their ledger counts and first and last progress lines (S6)."""
        return Response(TaskSerializer([asdict(t) for t in run_tasks(get_run(pk))], many=True).data)

    @extend_schema(parameters=[TASK], responses={200: WorkerSerializer(many=True), **READ_ERRORS})
    @action(detail=True, methods=["get"])
    def workers(self, request: Request, pk: str) -> Response:
        """The workers of the run's tasks (of one with ?task=) (S9)."""
        run = get_run(pk)
        task_id = _task_param(request, run, required=False)
        rows = [
            {"task_id": task.task_id, **asdict(worker)}
            for task in run.tasks.all()
            if task_id is None or task.task_id == task_id
            for worker in task_workers(run, task)
        ]
        return Response(WorkerSerializer(rows, many=True).data)

    @extend_schema(parameters=[TASK], responses={200: OutputListingSerializer, **READ_ERRORS})
    @action(detail=True, methods=["get"])
    def outputs(self, request: Request, pk: str) -> Response:
        """The files of the tasks' outputs, paths relative to the store (S10)."""
        run = get_run(pk)
        listing = run_outputs(run.id, _task_param(request, run, required=False))
        return Response(OutputListingSerializer(listing).data)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "path",
                {"type": "string", "minLength": 1},
                required=True,
                description="As the listing gives it.",
            ),
            OpenApiParameter(
                "Range",
                {"type": "string", "pattern": r"^bytes=[0-9]{0,18}-[0-9]{0,18}$"},
                OpenApiParameter.HEADER,
                description="bytes=a-b, bytes=a- or bytes=-n (416 when it selects nothing)",
            ),
        ],
        responses={
            (200, "*/*"): OpenApiResponse(
                OpenApiTypes.BINARY, description="The file, of the type its name suggests."
            ),
            (206, "*/*"): OpenApiTypes.BINARY,
            (400, "application/json"): E,
            (416, "application/json"): E,
            **{(code, "application/json"): E for code in READ_ERRORS},
        },
    )
    @action(
        detail=True,
        methods=["get"],
        url_path="outputs/download",
        renderer_classes=[JSONRenderer, AnyMediaRenderer],
    )
    def download(self, request: Request, pk: str) -> HttpResponseBase:
        """One output file; a `Range: bytes=a-b` header gets those bytes (206)."""
        run = get_run(pk)
        path = request.query_params.get("path")
        if not path:
            raise InvalidInput("path: give the file's path as the outputs listing shows it")
        opened = output_file(run.id, path)
        try:
            part = byte_range(request.headers.get("Range"), opened.size)
        except BaseException:
            opened.handle.close()
            raise
        return file_response(request._request, opened, part)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "metadata_only",
                bool,
                description="Each file's digest and size without its bytes (false: every byte).",
            )
        ],
        responses={
            (200, "application/zip"): OpenApiResponse(
                OpenApiTypes.BINARY, description="The run as a Workflow Run RO-Crate (zip)."
            ),
            **{(code, "application/json"): E for code in (400, 409, *READ_ERRORS)},
        },
    )
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, AnyMediaRenderer])
    def crate(self, request: Request, pk: str) -> HttpResponseBase:
        """The ended run as a Workflow Run RO-Crate, a zip made while it is sent
        (docs/provenance.md); 409 while the run is live."""
        run = get_run(pk)
        chunks = exported_zip(run_id=run.id, metadata_only=_flag(request, "metadata_only"))
        return chunks_response(
            request._request,
            chunks,
            content_type="application/zip",
            filename=f"simrun-{run.id}.crate.zip",
        )

    @extend_schema(
        parameters=[
            TASK_REQUIRED,
            OpenApiParameter(
                "tail",
                {"type": "integer", "minimum": 1, "maximum": 100_000},
                description="Only the last lines.",
            ),
            OpenApiParameter("follow", bool, description="Stream new lines as text/plain."),
        ],
        responses={
            (200, "application/json"): LogEntrySerializer(many=True),
            (200, "text/plain"): OpenApiTypes.STR,
            **{(code, "application/json"): E for code in (400, *READ_ERRORS)},
        },
    )
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, PlainTextRenderer])
    def logs(self, request: Request, pk: str) -> HttpResponseBase:
        """The logs of a task's pods, every attempt; `follow` streams new lines until the task
        ends (or SIMRUN_EVENTS_MAX_S passes)."""
        run = get_run(pk)
        task_id = _task_param(request, run, required=True)
        assert task_id is not None
        tail = _int_param(request, "tail", 1, 100_000)
        if _flag(request, "follow"):
            return log_stream(request, run.id, task_id, tail=tail)
        task = next(t for t in run.tasks.all() if t.task_id == task_id)
        entries = [asdict(e) for e in task_logs(run, task, tail)]
        return Response(LogEntrySerializer(entries, many=True).data)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "Last-Event-ID",
                {"type": "string", "pattern": EVENT_ID},
                OpenApiParameter.HEADER,
                description="Resume after it.",
            )
        ],
        responses={
            (200, "text/event-stream"): ServerEventSerializer,
            **{(code, "application/json"): E for code in (400, *READ_ERRORS)},
        },
    )
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, EventStreamRenderer])
    def events(self, request: Request, pk: str) -> HttpResponseBase:
        """Server-sent events of the run's state and progress (S16); resume with
        `Last-Event-ID`. The stream ends when the run ends or after SIMRUN_EVENTS_MAX_S."""
        run = get_run(pk)
        last = request.headers.get("Last-Event-ID") or None
        try:
            after = EventId.parse(last) if last else None
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        return run_event_stream(request, run.id, after=after)

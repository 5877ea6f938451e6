"""Shapes of the API's requests and answers; no logic beyond checking input types and ranges.

Answers are serialized from the plain values of `runs.selectors` and `runs.services`; the
same classes describe them in the OpenAPI document.
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from runs.models import RunState
from runs.selectors.runs_list import CURSOR, MAX_LIMIT

RUN_ID = r"^[a-z0-9]{1,24}$"
DIGEST = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
_STATE = "|".join([*RunState, "live", "ended"])
STATES = rf"^(({_STATE})(,({_STATE}))*)?$"


class ErrorItemSerializer(serializers.Serializer):
    loc = serializers.CharField(help_text="Dotted location, e.g. tasks[0].settings.n_points.")
    message = serializers.CharField()
    task = serializers.CharField(allow_null=True)
    line = serializers.IntegerField(allow_null=True, help_text="Line in the workflow text.")
    text = serializers.CharField(help_text="The error as one line.")


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What is wrong, for a person or an agent.")
    code = serializers.CharField(help_text="A stable code, e.g. run_not_found, not_yours.")
    # `errors`, `fields` and `data` name attributes of a serializer too; as declared fields they
    # are only keys of the answer
    errors = ErrorItemSerializer(many=True, required=False)  # type: ignore[assignment]
    fields = serializers.DictField(required=False, help_text="Errors per input field.")  # type: ignore[assignment]


@extend_schema_field(
    {"oneOf": [{"type": "string", "pattern": r"\S"}, {"type": "object"}]},
)
class WorkflowField(serializers.JSONField):
    """A workflow: an object, or its YAML/JSON text (errors then carry line numbers)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, (dict, str)):
            raise serializers.ValidationError("a workflow object or its YAML/JSON text")
        if isinstance(data, str) and not data.strip():
            raise serializers.ValidationError("the workflow text is empty")
        return data


SPLIT_TEXT = re.compile(r"^(auto|none|[1-9][0-9]{0,2}|1000)$")


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "pattern": SPLIT_TEXT.pattern},
            {"type": "integer", "minimum": 1, "maximum": 1000},
        ],
        "nullable": True,
    }
)
class SplitField(serializers.CharField):
    """auto, none, or a number of pods (1-1000), as a number or its digits."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, int) and not isinstance(data, bool) and 1 <= data <= 1000:
            return data
        if isinstance(data, str) and SPLIT_TEXT.match(data):
            return data if data in ("auto", "none") else int(data)
        raise serializers.ValidationError("split is auto, none or a number of pods (1-1000)")


def _json_type_error(field: serializers.Field, value: Any) -> str | None:
    """What is wrong with the JSON type of `value` for `field`; None when it fits.

    DRF converts on its own (a text field takes 0 as "0", a number "1.5"); the OpenAPI
    document promises JSON types, so a body keeps to them.
    """
    if isinstance(field, SplitField):
        return None  # a number or its digits, by design
    if isinstance(field, serializers.CharField) and not isinstance(value, str):
        return "a string"
    if isinstance(field, (serializers.IntegerField, serializers.FloatField)) and (
        isinstance(value, bool) or not isinstance(value, (int, float))
    ):
        return "a number"
    if (
        isinstance(field, serializers.ListField)
        and isinstance(field.child, serializers.CharField)
        and isinstance(value, list)
        and not all(isinstance(item, str) for item in value)
    ):
        return "a list of strings"
    return None


class JsonBodySerializer(serializers.Serializer):
    """A request body of JSON whose fields keep to their JSON types (null aside)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            errors = {
                name: [error]
                for name, field in self.fields.items()
                if data.get(name) is not None
                and (error := _json_type_error(field, data[name])) is not None
            }
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


class WhoAmISerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()
    tier = serializers.CharField(help_text="The priority tier of the runs this token submits.")
    acts_for = serializers.CharField(allow_null=True)


class RunItemSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField(help_text="The workflow's name.")
    state = serializers.ChoiceField(choices=RunState.choices())
    message = serializers.CharField(allow_blank=True)
    owner = serializers.CharField(help_text="Whose run it counts as (an agent's person).")
    submitted_by = serializers.CharField()
    tier = serializers.CharField()
    group = serializers.CharField(allow_blank=True)
    progress = serializers.FloatField(
        allow_null=True, help_text="0 to 1 while active (S7); null once ended."
    )
    created_at = serializers.DateTimeField()
    submitted_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)
    pending = serializers.ChoiceField(
        choices=["", "cancelling", "deleting"],
        help_text="What a worker still does after a cancel (its workflow, node and logs) or a "
        "delete (its record and files), answered at once; empty otherwise.",
    )


class RunPageSerializer(serializers.Serializer):
    runs = RunItemSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)


@extend_schema_field({"type": "string", "pattern": STATES})
class StatesField(serializers.CharField):
    """States to filter by; the selector says which part is no state."""


class RunListQuerySerializer(serializers.Serializer):
    """The filters of the run list; an empty one (`?group=`) is the same as none."""

    state = StatesField(
        required=False, allow_blank=True, help_text="Comma list of states, or live / ended."
    )
    group = serializers.CharField(required=False, allow_blank=True, max_length=128)
    owner = serializers.CharField(required=False, allow_blank=True, max_length=64)
    cursor = serializers.RegexField(
        f"^$|{CURSOR}", required=False, allow_blank=True, help_text="next_cursor as given."
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT, default=50)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A filter given twice (`?limit=5&limit=x`) is refused: which one was meant?"""
        given = getattr(self.initial_data, "getlist", None)
        if given is not None:
            names: list[str] = list(self.fields)
            twice = {n: "given more than once: give it once" for n in names if len(given(n)) > 1}
            if twice:
                raise serializers.ValidationError(twice)
        return attrs


class LedgerCountsSerializer(serializers.Serializer):
    pending = serializers.IntegerField()
    claimed = serializers.IntegerField()
    done = serializers.IntegerField()
    total = serializers.IntegerField()


class TaskSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    type = serializers.CharField()
    state = serializers.CharField()
    splittable = serializers.BooleanField()
    dependencies = serializers.ListField(child=serializers.CharField())
    units_total = serializers.IntegerField(allow_null=True)
    counts = LedgerCountsSerializer(allow_null=True)
    first = serializers.DictField(allow_null=True, help_text="The first progress line.")
    last = serializers.DictField(allow_null=True, help_text="The last progress line.")
    fraction = serializers.FloatField()
    message = serializers.CharField(allow_blank=True)
    started_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)


class ReuseSerializer(serializers.Serializer):
    reused = serializers.IntegerField(help_text="Units linked from earlier runs.")
    units = serializers.IntegerField(help_text="Units of the run (one per unsplit task).")
    sources = serializers.DictField(
        child=serializers.IntegerField(), help_text="Run → units reused from it."
    )
    enabled = serializers.BooleanField(help_text="Whether the run reuses done units.")
    resume_from = serializers.CharField(allow_blank=True)
    text = serializers.CharField(help_text='"reused N of M units"')


class RunDetailSerializer(RunItemSerializer):
    workflow_name = serializers.CharField()
    workflow = serializers.JSONField()
    sources = serializers.JSONField()
    environment = serializers.JSONField()
    reserve = serializers.CharField(allow_blank=True)
    tasks = TaskSerializer(many=True)
    reuse = ReuseSerializer()
    may_change = serializers.BooleanField(help_text="Whether this token may cancel/delete it.")
    controller_idle_s = serializers.FloatField(
        allow_null=True,
        help_text="Seconds since the controller last reconciled (null: it never did).",
    )
    controller_late_s = serializers.FloatField(
        help_text="After this many seconds without a reconcile the controller counts as stopped."
    )


class JsonBooleanField(serializers.BooleanField):
    """A boolean of a JSON body: `true` or `false` only (not 0, 1, "yes")."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class SubmitSerializer(JsonBodySerializer):
    workflow = WorkflowField()
    sources = serializers.ListField(
        child=serializers.RegexField(DIGEST),
        default=list,
        max_length=32,
        help_text="Snapshot digests, the model first.",
    )
    group = serializers.CharField(max_length=128, allow_blank=True, default="")
    split = SplitField(required=False, allow_null=True, default=None)
    reserve = serializers.CharField(
        max_length=253, required=False, allow_null=True, allow_blank=True, default=None
    )
    reuse = JsonBooleanField(
        default=True, help_text="Reuse units done in earlier runs with the same key."
    )
    resume_from = serializers.RegexField(
        r"^[a-z0-9]{1,24}$",
        required=False,
        allow_null=True,
        default=None,
        help_text="A run whose done units are reused first.",
    )


class ValidateSerializer(serializers.Serializer):
    workflow = WorkflowField()


class ValidationResultSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    errors = ErrorItemSerializer(many=True)  # type: ignore[assignment]


class EstimateSerializer(SubmitSerializer):
    group = None  # type: ignore[assignment]
    reuse = None  # type: ignore[assignment]
    resume_from = None  # type: ignore[assignment]


class TaskEstimateSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    type = serializers.CharField()
    units = serializers.IntegerField(allow_null=True)
    resources = serializers.DictField()
    plan = serializers.DictField()
    seconds = serializers.FloatField(allow_null=True, help_text="null without history.")


class WorkerSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    worker = serializers.CharField()
    role = serializers.CharField()
    state = serializers.CharField()
    node = serializers.CharField(allow_null=True)
    attempts = serializers.IntegerField()
    processes = serializers.IntegerField(allow_null=True)
    units_done = serializers.IntegerField()
    units_claimed = serializers.IntegerField()
    peak_memory_gb = serializers.FloatField(allow_null=True)
    memory_limit_gb = serializers.FloatField(allow_null=True)
    oom_killed = serializers.BooleanField()
    exit_code = serializers.IntegerField(allow_null=True)
    error = serializers.CharField(allow_null=True)


class OutputFileSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="Relative to the run store.")
    task = serializers.CharField()
    size = serializers.IntegerField()
    modified = serializers.DateTimeField()


class OutputListingSerializer(serializers.Serializer):
    files = OutputFileSerializer(many=True)
    truncated = serializers.BooleanField()


class LogEntrySerializer(serializers.Serializer):
    pod = serializers.CharField()
    attempt = serializers.IntegerField()
    text = serializers.CharField(allow_blank=True)
    ended = serializers.BooleanField()
    error = serializers.CharField(allow_null=True)
    truncated = serializers.BooleanField()
    kept = serializers.BooleanField()


class PodUsageSerializer(serializers.Serializer):
    run_id = serializers.CharField(allow_null=True)
    task_id = serializers.CharField()
    pod = serializers.CharField()
    phase = serializers.CharField()
    cores = serializers.FloatField()
    memory_gb = serializers.FloatField()


class ServerSerializer(serializers.Serializer):
    name = serializers.CharField()
    cores = serializers.FloatField(help_text="What the scheduler gives runs.")
    memory_gb = serializers.FloatField()
    gpus = serializers.IntegerField()
    reserved_by = serializers.CharField(allow_null=True)
    cores_used = serializers.FloatField()
    memory_used_gb = serializers.FloatField()
    pods = PodUsageSerializer(many=True)


class ServersSerializer(serializers.Serializer):
    servers = ServerSerializer(many=True)
    unplaced = PodUsageSerializer(many=True)


class CleanupRequestSerializer(JsonBodySerializer):
    older_than_days = serializers.FloatField(min_value=0, max_value=36_500)
    group = serializers.CharField(max_length=128, required=False, allow_blank=True)
    failed_only = JsonBooleanField(default=False)
    dry_run = JsonBooleanField(default=False)


class SkippedSerializer(serializers.Serializer):
    run = serializers.CharField()
    reason = serializers.CharField()


class CleanupResultSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    runs = serializers.ListField(child=serializers.CharField())
    paths = serializers.ListField(child=serializers.CharField(), help_text="Relative to store.")
    bytes_freed = serializers.IntegerField()
    skipped = SkippedSerializer(many=True)


class UsageSerializer(serializers.Serializer):
    runs = serializers.DictField(child=serializers.IntegerField())
    groups = serializers.DictField(child=serializers.IntegerField())
    snapshots = serializers.IntegerField()
    total = serializers.IntegerField()


class CompareRowSerializer(serializers.Serializer):
    section = serializers.CharField()
    key = serializers.CharField()
    values = serializers.ListField(child=serializers.JSONField(allow_null=True))
    differs = serializers.BooleanField()


class ComparisonSerializer(serializers.Serializer):
    runs = RunItemSerializer(many=True)
    rows = CompareRowSerializer(many=True)


class TaskTypeSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    splittable = serializers.BooleanField()
    ports = serializers.ListField(child=serializers.CharField())
    outputs = serializers.ListField(child=serializers.CharField())
    any_port = serializers.BooleanField()
    hint = serializers.DictField(help_text="The default resources.")
    settings_schema = serializers.DictField(help_text="JSON Schema of the settings.")


class SnapshotSerializer(serializers.Serializer):
    digest = serializers.CharField()
    name = serializers.CharField(allow_blank=True)
    source_path = serializers.CharField(allow_blank=True)
    git_remote = serializers.CharField(allow_blank=True)
    git_commit = serializers.CharField(allow_blank=True)
    git_dirty = serializers.BooleanField(allow_null=True)
    files = serializers.IntegerField()
    bytes = serializers.IntegerField()
    created_by = serializers.CharField(source="created_by.name", allow_null=True, default=None)
    created_at = serializers.DateTimeField()


class ProvenanceSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
    source_path = serializers.CharField(
        max_length=1024, required=False, allow_blank=True, default=""
    )
    git_remote = serializers.CharField(
        max_length=1024, required=False, allow_blank=True, default=""
    )
    git_commit = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    git_dirty = JsonBooleanField(required=False, allow_null=True, default=None)


@extend_schema_field({"type": "boolean"})
class QueryBooleanField(serializers.Field):
    """A boolean of the query: exactly `true` or `false`."""

    def to_internal_value(self, data: Any) -> bool:
        if data not in ("true", "false"):
            raise serializers.ValidationError("true or false")
        return bool(data == "true")

    def to_representation(self, value: Any) -> Any:
        return value


class ProvenanceQuerySerializer(ProvenanceSerializer):
    """The provenance of an upload, in its query."""

    git_dirty = QueryBooleanField(required=False, default=None)  # type: ignore[assignment]


class RegisterSnapshotSerializer(JsonBodySerializer, ProvenanceSerializer):
    digest = serializers.RegexField(DIGEST, help_text="A snapshot written into the store.")


class ServerEventSerializer(serializers.Serializer):
    """One server-sent event of a run's stream; `data` is JSON text."""

    event = serializers.ChoiceField(choices=["state", "progress", "end", "deleted"])
    id = serializers.CharField(required=False, help_text="<version>-<done>; resume after it.")
    data = serializers.CharField(help_text="JSON: the run's state, its counts, or its end.")  # type: ignore[assignment]

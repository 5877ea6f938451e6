"""Workflows: a submission, its validation and estimate, the task types, and who asks."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from runs.api.serializers.errors import ErrorItemSerializer
from runs.api.serializers.fields import (
    DIGEST,
    RUN_ID,
    JsonBodySerializer,
    JsonBooleanField,
    SplitField,
    WorkflowField,
)


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
        RUN_ID,
        required=False,
        allow_null=True,
        default=None,
        help_text="A run whose done units are reused first.",
    )


class ValidateSerializer(JsonBodySerializer):
    workflow = WorkflowField()
    sources = serializers.ListField(
        child=serializers.RegexField(DIGEST),
        default=list,
        max_length=32,
        help_text="Snapshot digests, the model first: the workflow is checked with the types"
        " of the model's environment once it is built (else the service's own).",
    )


class ValidationResultSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    errors = ErrorItemSerializer(many=True)  # type: ignore[assignment]


class EstimateSerializer(SubmitSerializer):
    group = None  # type: ignore[assignment]
    reuse = None  # type: ignore[assignment]
    resume_from = None  # type: ignore[assignment]


class ReusePreviewRequestSerializer(SubmitSerializer):
    group = None  # type: ignore[assignment]
    split = None  # type: ignore[assignment]
    reserve = None  # type: ignore[assignment]


class TaskReusePreviewSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    type = serializers.CharField()
    key = serializers.CharField(help_text="The task's key (docs/reuse.md).")
    units = serializers.IntegerField(help_text="A split task's units; 1 for an unsplit one.")
    reused = serializers.IntegerField(help_text="Units a submission now would reuse.")
    sources = serializers.DictField(
        child=serializers.IntegerField(), help_text="Run → units it would reuse from it."
    )
    note = serializers.DictField(
        help_text="Why not more: `text`, `compared_with` (a run) and `differs` (the first part"
        " of the key that differs: part, name, here, there)."
    )


class ReusePreviewSerializer(serializers.Serializer):
    reused = serializers.IntegerField()
    units = serializers.IntegerField()
    text = serializers.CharField()
    tasks = TaskReusePreviewSerializer(many=True)


class TaskEstimateSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    type = serializers.CharField()
    units = serializers.IntegerField(allow_null=True)
    resources = serializers.DictField()
    plan = serializers.DictField()
    seconds = serializers.FloatField(allow_null=True, help_text="null without history.")


class TaskTypeSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    splittable = serializers.BooleanField()
    ports = serializers.ListField(child=serializers.CharField())
    outputs = serializers.ListField(child=serializers.CharField())
    any_port = serializers.BooleanField()
    hint = serializers.DictField(help_text="The default resources.")
    settings_schema = serializers.DictField(help_text="JSON Schema of the settings.")


class WhoAmISerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()
    tier = serializers.CharField(help_text="The priority tier of the runs this token submits.")
    acts_for = serializers.CharField(allow_null=True)


class CrateRunQuerySerializer(serializers.Serializer):
    """The options of a run made again from a crate, in the query (the body is the crate);
    an empty one (`?group=`) is the same as none."""

    group = serializers.CharField(max_length=128, required=False, allow_blank=True, default="")
    reuse = serializers.ChoiceField(
        ["true", "false"],
        required=False,
        allow_blank=True,
        default="false",
        help_text="Reuse units done in earlier runs with the same key (false: compute all).",
    )
    resume_from = serializers.RegexField(
        f"^$|{RUN_ID}",
        required=False,
        allow_blank=True,
        default="",
        help_text="A run whose done units are reused first.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return {
            "group": attrs["group"],
            "reuse": attrs["reuse"] == "true",
            "resume_from": attrs["resume_from"] or None,
        }

"""The one shape of the API's errors (`runs/api/errors.py` answers with it)."""

from __future__ import annotations

from rest_framework import serializers


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

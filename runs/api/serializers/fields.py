"""Input fields the request shapes share, and a body whose fields keep to their JSON types."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

RUN_ID = r"^[a-z0-9]{1,24}$"
DIGEST = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"


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


class JsonBooleanField(serializers.BooleanField):
    """A boolean of a JSON body: `true` or `false` only (not 0, 1, "yes")."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


@extend_schema_field({"type": "boolean"})
class QueryBooleanField(serializers.Field):
    """A boolean of the query: exactly `true` or `false`."""

    def to_internal_value(self, data: Any) -> bool:
        if data not in ("true", "false"):
            raise serializers.ValidationError("true or false")
        return bool(data == "true")

    def to_representation(self, value: Any) -> Any:
        return value

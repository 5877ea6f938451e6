"""A form made from a task type's settings JSON Schema, and the YAML task it produces.

The renderer covers what settings models use: integers and numbers (with their bounds),
strings (an enum becomes a select), booleans, arrays of scalars as comma lists, optional
values (`anyOf` with null), and mappings as small YAML blocks. The task it yields is appended
to the workflow text, which the validation then checks like any pasted workflow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from django import forms
from django.core.validators import RegexValidator

from runs.workflow import TASK_ID

SETTING = "setting_"
INPUT = "input_"


class SchemaFormError(ValueError):
    """The workflow text cannot take the new task; the message says why."""


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """Follow a local `$ref` (pydantic puts enums and nested models under `$defs`)."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
        return {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _unwrap_optional(schema: dict[str, Any], root: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """`anyOf: [X, null]` → (X, True); anything else → (itself, False)."""
    options = schema.get("anyOf")
    if isinstance(options, list):
        rest = [o for o in options if o.get("type") != "null"]
        if len(rest) == 1 and len(rest) < len(options):
            merged = {
                **_resolve(rest[0], root),
                **{k: v for k, v in schema.items() if k != "anyOf"},
            }
            return merged, True
    return _resolve(schema, root), False


class CommaList(forms.CharField):
    """A list of scalars typed in as `a, b, c`."""

    def __init__(self, *, item_type: str, **kwargs: Any) -> None:
        self.item_type = item_type
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return ", ".join(str(v) for v in value)
        return value

    def to_python(self, value: Any) -> list[Any] | None:  # type: ignore[override]
        text = super().to_python(value)
        if not text:
            return None
        items = [part.strip() for part in text.split(",") if part.strip()]
        converters: dict[str, Callable[[str], Any]] = {
            "integer": int,
            "number": float,
            "boolean": _boolean,
        }
        convert = converters.get(self.item_type, str)
        try:
            return [convert(item) for item in items]
        except ValueError as exc:
            raise forms.ValidationError(f"every item must be a {self.item_type}") from exc


def _boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered in {"true", "yes", "1"}:
        return True
    if lowered in {"false", "no", "0"}:
        return False
    raise ValueError(text)


class YamlMapping(forms.CharField):
    """A mapping typed as YAML (`key: value` lines)."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            return yaml.safe_dump(value, sort_keys=False).strip() if value else ""
        return value

    def to_python(self, value: Any) -> dict[str, Any] | None:  # type: ignore[override]
        text = super().to_python(value)
        if not text:
            return None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise forms.ValidationError(f"not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise forms.ValidationError("write one `key: value` per line")
        return data


def setting_field(schema: dict[str, Any], *, required: bool, root: dict[str, Any]) -> forms.Field:
    """The form field of one setting."""
    schema, optional = _unwrap_optional(schema, root)
    required = required and not optional
    kind = schema.get("type")
    common: dict[str, Any] = {
        "label": schema.get("title"),
        "help_text": schema.get("description", ""),
        "required": required,
        "initial": schema.get("default"),
    }
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        choices = [(str(v), str(v)) for v in values]
        if not required:
            choices.insert(0, ("", "—"))
        return forms.TypedChoiceField(
            choices=choices, coerce=_coerce_enum(values), empty_value=None, **common
        )
    if kind in ("integer", "number"):
        bounds: dict[str, Any] = {
            "min_value": schema.get("minimum", schema.get("exclusiveMinimum")),
            "max_value": schema.get("maximum", schema.get("exclusiveMaximum")),
        }
        bounds = {key: value for key, value in bounds.items() if value is not None}
        if kind == "integer":
            return forms.IntegerField(**bounds, **common)
        return forms.FloatField(**bounds, widget=forms.NumberInput(attrs={"step": "any"}), **common)
    if kind == "boolean":
        common["required"] = False
        return forms.BooleanField(**common)
    if kind == "array":
        items = _resolve(schema.get("items", {}), root)
        if items.get("type") in ("string", "integer", "number", "boolean"):
            common["help_text"] = (common["help_text"] + " (comma separated)").strip()
            return CommaList(item_type=items["type"], **common)
        return YamlMapping(**common)
    if kind == "object":
        return YamlMapping(**common)
    length = {
        k: schema[s]
        for k, s in (("min_length", "minLength"), ("max_length", "maxLength"))
        if s in schema
    }
    return forms.CharField(**length, **common)


def _coerce_enum(values: list[Any]) -> Any:
    by_text = {str(v): v for v in values}
    return lambda text: by_text[text]


def task_form_class(schema: dict[str, Any], *, ports: list[str]) -> type[forms.Form]:
    """A form class with the task id, one field per setting and one per input port."""
    fields: dict[str, forms.Field] = {
        "task_id": forms.CharField(
            label="Task id",
            max_length=40,
            validators=[RegexValidator(TASK_ID, "lowercase letters, digits, - and _")],
            help_text="Unique in the workflow, e.g. scan.",
        )
    }
    required = set(schema.get("required", []))
    for name, prop in schema.get("properties", {}).items():
        fields[SETTING + name] = setting_field(prop, required=name in required, root=schema)
        if fields[SETTING + name].label is None:
            fields[SETTING + name].label = name.replace("_", " ").capitalize()
    for port in ports:
        fields[INPUT + port] = forms.CharField(
            label=f"Input {port}", help_text="The task it reads from: <task> or <task>.<path>."
        )
    return type("TaskSettingsForm", (forms.Form,), fields)


def task_of(cleaned: dict[str, Any], *, type_name: str) -> dict[str, Any]:
    """The workflow task a valid form describes; empty optional settings are left out."""
    settings = {
        key.removeprefix(SETTING): value
        for key, value in cleaned.items()
        if key.startswith(SETTING) and value not in (None, "", [])
    }
    inputs = {
        key.removeprefix(INPUT): value for key, value in cleaned.items() if key.startswith(INPUT)
    }
    task: dict[str, Any] = {"id": cleaned["task_id"], "type": type_name, "settings": settings}
    if inputs:
        task["inputs"] = inputs
    return task


def with_task(text: str, task: dict[str, Any]) -> str:
    """The workflow text with `task` appended (a new workflow when the text is empty)."""
    if not text.strip():
        data: Any = {"name": "my-workflow", "tasks": []}
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise SchemaFormError(f"the workflow is not valid YAML yet: {exc}") from exc
    if not isinstance(data, dict):
        raise SchemaFormError("the workflow must be a mapping with name and tasks")
    tasks = data.setdefault("tasks", [])
    if not isinstance(tasks, list):
        raise SchemaFormError("tasks must be a list")
    if any(isinstance(t, dict) and t.get("id") == task["id"] for t in tasks):
        raise SchemaFormError(f"the workflow has a task {task['id']!r} already")
    tasks.append(task)
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)

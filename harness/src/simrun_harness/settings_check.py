"""A type's settings checked against its settings model: every error at once, and the settings
as its model keys them.

Runs where the plugin's code runs (the plugin host, a pod): the service never imports a
plugin's module. No Django here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

Problem = tuple[tuple[str | int, ...], str]
"""(location inside the settings, message)."""


def unknown_settings(model: type[BaseModel], settings: dict[str, Any]) -> list[str]:
    """Keys that are no field of the model (by name or alias); none if it allows extras."""
    if model.model_config.get("extra") == "allow":
        return []
    names: set[str] = set()
    for name, field in model.model_fields.items():
        names.add(name)
        if field.alias:
            names.add(field.alias)
        if isinstance(field.validation_alias, str):
            names.add(field.validation_alias)
    return sorted(k for k in settings if k not in names)


def check_settings(
    model: type[BaseModel], settings: dict[str, Any]
) -> tuple[BaseModel | None, list[Problem]]:
    """The validated settings and no problem, or None and every problem: each unknown key
    (with the allowed ones) and each invalid value. An exception of the model's own code that
    is no validation error propagates (the caller names the plugin)."""
    problems: list[Problem] = []
    unknown = unknown_settings(model, settings)
    for key in unknown:
        allowed = ", ".join(sorted(model.model_fields)) or "none"
        problems.append(((key,), f"unknown setting (allowed: {allowed})"))
    try:
        validated = model.model_validate(settings)
    except ValidationError as exc:
        for e in exc.errors():
            if e["type"] == "extra_forbidden" and e["loc"] and e["loc"][0] in unknown:
                continue
            problems.append((tuple(e["loc"]), e["msg"]))
        return None, problems
    return (validated, []) if not problems else (None, problems)


def keyed_settings(validated: BaseModel) -> dict[str, Any]:
    """The settings as the model holds them, as JSON: every field, defaults written, values
    in the field's type (`1000` and `1000.0` of a float field are one value), keys in the
    model's order. What reuse keys a task by, so settings written differently but meaning the
    same give one key."""
    dumped: dict[str, Any] = validated.model_dump(mode="json")
    return dumped

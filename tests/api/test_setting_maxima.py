"""Every numeric setting of the example task types has a maximum, so no workflow can ask a
worker for a terabyte or a unit for a year; a value beyond it is a validation error naming
the setting and the maximum."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from runs.task_types import registry
from tests.api.conftest import Lab

EXAMPLE_TYPES = ("sleep", "spin", "allocate", "fail", "ode_scan", "sbml_scan", "summary")


def numbers_without_maximum(schema: dict[str, Any]) -> Iterator[str]:
    """The dotted places of the numbers in a JSON Schema that have no maximum."""
    definitions = schema.get("$defs", {})

    def walk(node: Any, where: str) -> Iterator[str]:
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            yield from walk(definitions[node["$ref"].rsplit("/", 1)[-1]], where)
        if node.get("type") in ("integer", "number") and not (
            "maximum" in node or "exclusiveMaximum" in node
        ):
            yield where
        for key, child in node.get("properties", {}).items():
            yield from walk(child, f"{where}.{key}" if where else key)
        for key in ("items", "additionalProperties"):
            yield from walk(node.get(key), f"{where}[]")
        for option in node.get("anyOf", []) + node.get("oneOf", []):
            yield from walk(option, where)

    yield from walk(schema, "")


@pytest.mark.parametrize("name", EXAMPLE_TYPES)
def test_every_numeric_setting_of_an_example_type_has_a_maximum(name: str) -> None:
    schema = registry()[name].settings_schema
    assert list(numbers_without_maximum(schema)) == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("task", "loc"),
    [
        ({"type": "allocate", "settings": {"mb": 10**12}}, "settings.mb"),
        ({"type": "sleep", "settings": {"seconds": 1e9}}, "settings.seconds"),
        (
            {"type": "ode_scan", "settings": {"parameters": {"alpha": [1.0]}, "chunk": 10**9}},
            "settings.chunk",
        ),
    ],
)
def test_a_setting_beyond_its_maximum_is_an_error_naming_it(
    lab: Lab, task: dict[str, Any], loc: str
) -> None:
    workflow = {"name": "big", "tasks": [{"id": "t", **task}]}
    body = lab.agent.client.post("/api/validate/", {"workflow": workflow}, format="json").json()
    assert body["valid"] is False, body
    [error] = body["errors"]
    assert error["loc"] == loc
    assert "less than or equal to" in error["text"], error["text"]

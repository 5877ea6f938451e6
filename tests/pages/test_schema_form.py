"""A task type's settings schema as a form, and the YAML task it appends (no database)."""

from __future__ import annotations

from typing import Literal

import pytest
import yaml
from django import forms
from pydantic import BaseModel, Field

from runs.pages.schema_form import (
    CommaList,
    SchemaFormError,
    YamlMapping,
    task_form_class,
    task_of,
    with_task,
)


class Settings(BaseModel):
    n: int = Field(3, ge=1, le=10, description="How many.")
    rate: float = 0.5
    name: str | None = None
    method: Literal["lsoda", "cvode"] = "lsoda"
    verbose: bool = False
    values: list[float] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)


def form_class() -> type[forms.Form]:
    return task_form_class(Settings.model_json_schema(), ports=["table"])


def test_each_setting_becomes_a_labelled_field_of_its_kind() -> None:
    fields = form_class()().fields
    assert isinstance(fields["setting_n"], forms.IntegerField)
    assert (fields["setting_n"].min_value, fields["setting_n"].max_value) == (1, 10)  # type: ignore[attr-defined]
    assert fields["setting_n"].help_text == "How many."
    assert isinstance(fields["setting_rate"], forms.FloatField)
    assert (
        isinstance(fields["setting_name"], forms.CharField) and not fields["setting_name"].required
    )
    assert isinstance(fields["setting_method"], forms.TypedChoiceField)
    assert isinstance(fields["setting_verbose"], forms.BooleanField)
    assert isinstance(fields["setting_values"], CommaList)
    assert isinstance(fields["setting_env"], YamlMapping)
    assert fields["input_table"].required
    assert fields["setting_n"].label == "N"


def test_a_filled_form_gives_the_task_with_typed_settings() -> None:
    form = form_class()(
        {
            "task_id": "scan",
            "setting_n": "4",
            "setting_rate": "0.25",
            "setting_method": "cvode",
            "setting_verbose": "on",
            "setting_values": "1, 2.5",
            "setting_env": "A: b",
            "input_table": "prep.table",
        }
    )
    assert form.is_valid(), form.errors
    task = task_of(form.cleaned_data, type_name="x")
    assert task == {
        "id": "scan",
        "type": "x",
        "settings": {
            "n": 4,
            "rate": 0.25,
            "method": "cvode",
            "verbose": True,
            "values": [1.0, 2.5],
            "env": {"A": "b"},
        },
        "inputs": {"table": "prep.table"},
    }
    assert Settings.model_validate(task["settings"])


def test_out_of_bounds_and_badly_typed_values_are_field_errors() -> None:
    form = form_class()({"task_id": "Bad", "setting_n": "11", "setting_values": "1, x"})
    assert not form.is_valid()
    assert set(form.errors) >= {"task_id", "setting_n", "setting_values", "input_table"}


def test_a_task_is_appended_to_the_workflow_text() -> None:
    text = with_task("name: w\ntasks:\n  - id: a\n    type: sleep\n", {"id": "b", "type": "sleep"})
    assert yaml.safe_load(text)["tasks"] == [
        {"id": "a", "type": "sleep"},
        {"id": "b", "type": "sleep"},
    ]


def test_an_empty_text_becomes_a_new_workflow() -> None:
    assert yaml.safe_load(with_task("", {"id": "b", "type": "sleep"}))["name"] == "my-workflow"


@pytest.mark.parametrize("text", ["name: [", "- a list", "name: w\ntasks: 3\n"])
def test_a_text_that_cannot_take_a_task_says_why(text: str) -> None:
    with pytest.raises(SchemaFormError):
        with_task(text, {"id": "b", "type": "sleep"})

"""The workflow spec: every error at once, one line each, with its location."""

from __future__ import annotations

from typing import ClassVar

import pytest
from pydantic import BaseModel, ConfigDict, Field

from runs.task_types import CommandType
from runs.validation import errors_of, load
from runs.workflow import WorkflowInvalid
from simrun_harness.plugin import SplitTaskType, TaskType, UnsplitTaskType


class ScanSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n_points: int = Field(10, gt=0)


class Scan(SplitTaskType):
    name: ClassVar[str] = "scan"
    settings_model: ClassVar[type[BaseModel]] = ScanSettings
    outputs: ClassVar[tuple[str, ...]] = ("table",)


class Summary(UnsplitTaskType):
    name: ClassVar[str] = "summary"
    ports: ClassVar[tuple[str, ...]] = ("scan",)


TYPES: dict[str, type[TaskType]] = {"scan": Scan, "summary": Summary, "command": CommandType}


def messages(text: str) -> list[str]:
    return [str(e) for e in errors_of(text, types=TYPES)]


def test_a_valid_workflow_loads_with_its_tasks() -> None:
    workflow = load(
        "name: s\ntasks:\n- {id: a, type: scan, settings: {n_points: 3}}\n"
        "- {id: b, type: summary, inputs: {scan: a}}\n",
        types=TYPES,
    )
    assert [t.id for t in workflow.tasks] == ["a", "b"]
    assert workflow.task("b").dependencies() == ["a"]


def test_an_invalid_setting_names_task_location_and_reason() -> None:
    """S4: an invalid setting is one error per field, naming the task, location and message."""
    assert messages("name: s\ntasks:\n- {id: scan, type: scan, settings: {n_points: 0}}\n") == [
        "task 'scan': settings.n_points: Input should be greater than 0"
    ]


def test_an_unknown_setting_is_an_error_not_dropped() -> None:
    """S4: an unknown setting is an error."""
    assert messages("name: s\ntasks:\n- {id: scan, type: scan, settings: {n_pionts: 5}}\n") == [
        "task 'scan': settings.n_pionts: unknown setting (allowed: n_points)"
    ]


def test_an_unknown_type_lists_the_known_ones() -> None:
    assert messages("name: s\ntasks:\n- {id: a, type: scna}\n") == [
        "task 'a': type: unknown task type 'scna' (known: command, scan, summary)"
    ]


def test_a_duplicate_task_id_is_an_error() -> None:
    text = "name: s\ntasks:\n- {id: a, type: scan}\n- {id: a, type: scan}\n"
    assert messages(text) == ["task 'a': id: duplicate task id (the first is task #0)"]


def test_an_input_from_a_missing_task_is_an_error() -> None:
    text = "name: s\ntasks:\n- {id: b, type: summary, inputs: {scan: nope}}\n"
    assert messages(text) == ["task 'b': inputs.scan: reads from task 'nope', which does not exist"]


def test_an_input_naming_a_missing_output_port_is_an_error() -> None:
    text = (
        "name: s\ntasks:\n- {id: a, type: scan}\n"
        "- {id: b, type: summary, inputs: {scan: a.tabel}}\n"
    )
    assert messages(text) == ["task 'b': inputs.scan: task 'a' has no output 'tabel' (has: table)"]


def test_a_port_the_type_does_not_take_is_an_error() -> None:
    text = (
        "name: s\ntasks:\n- {id: a, type: scan}\n"
        "- {id: b, type: summary, inputs: {scan: a, extra: a}}\n"
    )
    assert messages(text) == [
        "task 'b': inputs.extra: type 'summary' has no input port 'extra' (takes: scan)"
    ]


def test_a_missing_required_port_is_an_error() -> None:
    text = "name: s\ntasks:\n- {id: b, type: summary}\n"
    assert messages(text) == [
        "task 'b': inputs: input port 'scan' is missing (type 'summary' needs it)"
    ]


def test_a_cycle_names_its_tasks() -> None:
    text = (
        "name: s\ntasks:\n- {id: a, type: command, settings: {args: [x]}, inputs: {i: c}}\n"
        "- {id: b, type: command, settings: {args: [x]}, inputs: {i: a}}\n"
        "- {id: c, type: command, settings: {args: [x]}, inputs: {i: b}}\n"
    )
    assert messages(text) == ["tasks: cycle: a -> b -> c -> a"]


def test_every_error_is_reported_at_once_with_its_line() -> None:
    text = (
        "name: s\ntasks:\n"
        "- id: a\n  type: scan\n  settings: {n_points: -1, bogus: 1}\n"
        "- id: b\n  type: nope\n"
    )
    errors = errors_of(text, types=TYPES)
    assert [(e.line, str(e)) for e in errors] == [
        (5, "task 'a': settings.bogus: unknown setting (allowed: n_points)"),
        (5, "task 'a': settings.n_points: Input should be greater than 0"),
        (7, "task 'b': type: unknown task type 'nope' (known: command, scan, summary)"),
    ]


def test_a_structural_error_names_the_field() -> None:
    assert messages("name: s\ntasks:\n- {id: a, typ: scan}\n") == [
        "task 'a': type: Field required",
        "task 'a': typ: unknown field",
    ]


def test_a_syntax_error_gives_its_line() -> None:
    errors = errors_of("name: s\ntasks: [ {id: a\n", types=TYPES)
    assert len(errors) == 1
    assert errors[0].line == 3
    assert str(errors[0]).startswith("not valid YAML or JSON:")


def test_json_is_accepted_too() -> None:
    workflow = load('{"name": "j", "tasks": [{"id": "a", "type": "scan"}]}', types=TYPES)
    assert workflow.name == "j"


def test_an_invalid_workflow_raises_with_every_error() -> None:
    with pytest.raises(WorkflowInvalid) as caught:
        load("name: s\ntasks:\n- {id: a, type: x}\n- {id: b, type: y}\n", types=TYPES)
    assert len(caught.value.errors) == 2


def test_order_of_a_diamond_puts_each_task_after_what_it_reads() -> None:
    text = (
        "name: d\ntasks:\n"
        "- {id: join, type: command, settings: {args: [x]}, inputs: {l: left, r: right}}\n"
        "- {id: right, type: command, settings: {args: [x]}, inputs: {i: top}}\n"
        "- {id: left, type: command, settings: {args: [x]}, inputs: {i: top}}\n"
        "- {id: top, type: command, settings: {args: [x]}}\n"
    )
    order = [t.id for t in load(text, types=TYPES).order()]
    assert order == ["top", "right", "left", "join"]


def test_a_task_that_runs_once_cannot_be_split_into_pods() -> None:
    text = "name: s\ntasks:\n- {id: a, type: command, settings: {args: [x]}, split: 4}\n"
    assert messages(text) == [
        "task 'a': split: type 'command' runs once; split must be none, auto or 1"
    ]


def test_a_command_task_finds_its_inputs_relative_to_the_run_directory() -> None:
    from runs.services.submission import command_inputs

    assert command_inputs({"scan": "scan", "table": "scan.tables/a.csv"}) == {
        "SIMRUN_INPUT_SCAN": "tasks/scan/out",
        "SIMRUN_INPUT_TABLE": "tasks/scan/out/tables/a.csv",
    }

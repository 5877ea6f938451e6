"""Task keys: a changed setting or source changes the key of the task it touches and of every
task after it, and nothing else; resources are not part of a key (docs/reuse.md)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from runs.reuse import KeyedTask, task_keys
from simrun_harness.reuse import unit_keys
from tests.plugins import on_path, write_plugin

CHAIN = [
    KeyedTask("scan", "ode_scan", "0.1", {"t_end": 50}, {}),
    KeyedTask("summary", "summary", "0.1", {"threshold": 1.0}, {"scan": "scan"}),
    KeyedTask("other", "sleep", "0.1", {"units": 2}, {}),
]


def _keys(tasks: list[KeyedTask] = CHAIN, **changes: object) -> dict[str, str]:
    given = {"environment": "env-a", "sources": ["snap-a"], **changes}
    return task_keys(tasks=tasks, **given)  # type: ignore[arg-type]


def _changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {task for task in before if before[task] != after[task]}


def test_the_same_workflow_gets_the_same_keys() -> None:
    assert _keys() == _keys()
    assert len(set(_keys().values())) == 3


def test_a_changed_setting_changes_its_task_and_those_after_it_only() -> None:
    scan = replace(CHAIN[0], settings={"t_end": 60})
    summary = replace(CHAIN[1], settings={"threshold": 2.0})

    assert _changed(_keys(), _keys([scan, *CHAIN[1:]])) == {"scan", "summary"}
    assert _changed(_keys(), _keys([CHAIN[0], summary, CHAIN[2]])) == {"summary"}


def test_sources_environment_and_type_version_change_every_task() -> None:
    assert _changed(_keys(), _keys(sources=["snap-b"])) == {"scan", "summary", "other"}
    assert _changed(_keys(), _keys(environment="env-b")) == {"scan", "summary", "other"}
    newer = [replace(CHAIN[0], version="0.2"), *CHAIN[1:]]
    assert _changed(_keys(), _keys(newer)) == {"scan", "summary"}


def test_a_task_id_or_the_part_of_an_input_read_are_what_they_are() -> None:
    renamed = [replace(CHAIN[0], task_id="scan2"), replace(CHAIN[1], inputs={"scan": "scan2"})]
    assert _keys(renamed)["summary"] == _keys(CHAIN[:2])["summary"]  # ids are not outputs
    part = [CHAIN[0], replace(CHAIN[1], inputs={"scan": "scan.table"})]
    assert _keys(part)["summary"] != _keys(CHAIN[:2])["summary"]


def test_unit_keys_follow_their_task_key_place_and_value() -> None:
    first = unit_keys("k1", [{"a": 1}, {"a": 2}])
    assert first == unit_keys("k1", [{"a": 1}, {"a": 2}])
    assert first[0] != unit_keys("k2", [{"a": 1}])[0]
    assert first[1] != unit_keys("k1", [{"a": 1}, {"a": 3}])[1]
    assert unit_keys("k1", [{"b": 1, "a": 2}]) == unit_keys("k1", [{"a": 2, "b": 1}])


def test_a_plugin_installed_from_a_directory_is_versioned_by_its_files(tmp_path: Path) -> None:
    """Its code may change without a new version: an edit gives its types a new key."""
    from runs.task_types import registry

    def _version(name: str) -> str:
        return registry().plugin(name).digest

    project = tmp_path / "edited"
    root = write_plugin(
        project,
        package="edited-plugin",
        version="1.0",
        modules={"edited_types": SLEEPY},
        types={"edited_sleep": "edited_types:Sleepy"},
    )
    info = next(root.glob("*.dist-info"))
    (info / "direct_url.json").write_text(
        json.dumps({"url": f"file://{project}", "dir_info": {"editable": True}})
    )
    with on_path(root):
        before = _version("edited_sleep")
        (project / "edited_types.py").write_text(SLEEPY + "\n# edited\n")
        after = _version("edited_sleep")
    assert before.startswith("1.0+") and after.startswith("1.0+") and before != after


SLEEPY = """
from simrun_harness.plugin import UnsplitTaskType


class Sleepy(UnsplitTaskType):
    name = "edited_sleep"
"""

"""The tasks of a run in its crate's metadata: each task's step, settings, execution, resource
use and output, and the units its output reused from earlier runs (`wasDerivedFrom`).

A part of `runs.crates.metadata`'s builder, apart for its size: it builds on the builder's
crate, its `add` and `file`, and its ids of tools, outputs and settings.
"""

from __future__ import annotations

import json
from typing import Any

from rocrate.rocrate import ROCrate

from runs.crates.jsonld import FORMAL_PARAMETER, UNITS, iso_time, ref, status, value_type
from runs.crates.record import MadeFile, RunRecord, StoredFile, TaskRecord
from runs.states import TaskState


def reused_count(units: list[Any]) -> int:
    """Units of one earlier run in a task's record of reuse: [start, end) ranges of unit
    indices, unit names (a record of an earlier simrun), or ["out"] (an unsplit task's
    output)."""
    return sum(u[1] - u[0] if isinstance(u, list) else 1 for u in units)


def reused_text(units: list[Any], total: int | None) -> str:
    """The units of a record of reuse by name: `u000003 to u000009, u000012`, or `its output`."""
    width = max(6, len(str(max((total or 1) - 1, 0))))
    parts = []
    for unit in units:
        if isinstance(unit, list):
            first, last = f"u{unit[0]:0{width}d}", f"u{unit[1] - 1:0{width}d}"
            parts.append(first if unit[1] - unit[0] == 1 else f"{first} to {last}")
        else:
            parts.append("its output" if unit == "out" else str(unit))
    return ", ".join(parts)


class TaskEntities:
    """The builder's methods for tasks (mixed into `runs.crates.metadata`'s builder)."""

    record: RunRecord
    crate: ROCrate

    def add(self, entity_id: str, props: dict[str, Any]) -> Any:
        raise NotImplementedError

    def file(self, item: StoredFile | MadeFile, **extra: Any) -> Any:
        raise NotImplementedError

    def tools(self) -> None:
        raise NotImplementedError

    def tool_id(self, type_name: str) -> str:
        raise NotImplementedError

    def out_id(self, task: TaskRecord) -> str:
        raise NotImplementedError

    def folder(self, path: str, props: dict[str, Any]) -> str:
        raise NotImplementedError

    def settings_ids(self, task: TaskRecord) -> list[str]:
        raise NotImplementedError

    def tasks(self, workflow: Any, agent: str) -> tuple[list[str], list[str]]:
        """Every task: its step, settings, output, action and control; the workflow's steps,
        inputs and outputs. (actions, controls)."""
        self.tools()
        actions: list[str] = []
        controls: list[str] = []
        steps: list[dict[str, str]] = []
        inputs: list[dict[str, str]] = []
        outputs: list[dict[str, str]] = []
        for task in self.record.tasks:
            step = self.add(
                f"#step/{task.task_id}",
                {
                    "@type": "HowToStep",
                    "name": task.task_id,
                    "position": str(task.position),
                    "workExample": ref(self.tool_id(task.type)),
                },
            )
            steps.append(ref(step.id))
            values = self.settings(task, inputs)
            action_id = self.task_action(task, agent, values, self.task_output(task, outputs))
            actions.append(action_id)
            control = self.add(
                f"#control/{task.task_id}",
                {
                    "@type": "ControlAction",
                    "name": f"step {task.task_id}",
                    "instrument": ref(step.id),
                    "object": ref(action_id),
                    "actionStatus": ref(status(task.state)),
                },
            )
            controls.append(control.id)
        workflow["step"] = steps
        workflow["input"] = inputs
        workflow["output"] = outputs
        return actions, controls

    def settings(self, task: TaskRecord, inputs: list[dict[str, str]]) -> list[dict[str, str]]:
        """A FormalParameter of the workflow per setting of the task, realised by a
        PropertyValue (its value as text; JSON for a list or a mapping)."""
        values = []
        for key, pv_id in zip(sorted(task.settings), self.settings_ids(task), strict=True):
            value = task.settings[key]
            param = f"#parameter/{task.task_id}/{key}"
            self.add(
                param,
                {
                    "@type": "FormalParameter",
                    "name": f"{task.task_id}.{key}",
                    "additionalType": value_type(value),
                    "workExample": ref(pv_id),
                    "conformsTo": ref(FORMAL_PARAMETER),
                },
            )
            inputs.append(ref(param))
            shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            self.add(
                pv_id,
                {
                    "@type": "PropertyValue",
                    "name": key,
                    "value": shown,
                    "exampleOfWork": ref(param),
                },
            )
            values.append(ref(pv_id))
        return values

    def task_action(
        self, task: TaskRecord, agent: str, values: list[dict[str, str]], result: str | None
    ) -> str:
        """The task's execution by its tool: what it read, made, when, and what it used."""
        read = [
            ref(self.out_id(t))
            for t in self.record.tasks
            if t.task_id in task.dependencies and t.outputs
        ]
        action_id = f"#task/{task.task_id}"
        props: dict[str, Any] = {
            "@type": "CreateAction",
            "name": f"task {task.task_id} ({task.type})",
            "description": self.task_description(task),
            "instrument": ref(self.tool_id(task.type)),
            "agent": ref(agent),
            "object": values + read,
            "actionStatus": ref(status(task.state)),
        }
        if result:
            props["result"] = ref(result)
        if task.started_at:
            props["startTime"] = iso_time(task.started_at)
        if task.ended_at:
            props["endTime"] = iso_time(task.ended_at)
        if task.state != TaskState.DONE and task.message:
            props["error"] = task.message
        usage = [self.usage(task, name, value) for name, value in sorted(task.usage.items())]
        if usage:
            props["resourceUsage"] = [ref(u) for u in usage]
        self.add(action_id, props)
        for log in task.logs:
            self.file(log, about=ref(action_id))
        return action_id

    def task_description(self, task: TaskRecord) -> str:
        text = f"{'split' if task.splittable else 'unsplit'} task of type {task.type}, {task.state}"
        if task.units_total is not None:
            text += f", {task.units_total} units"
        reused = sum(reused_count(units) for units in task.reused.values())
        if reused:
            text += f", {reused} reused from " + ", ".join(sorted(task.reused))
        return text

    def usage(self, task: TaskRecord, name: str, value: float) -> str:
        usage_id = f"#usage/{task.task_id}/{name}"
        props = {
            "@type": "PropertyValue",
            "name": name,
            "propertyID": f"urn:simrun:usage:{name}",
            "value": str(value),
        }
        unit = UNITS.get(name)
        if unit:
            props["unitCode"] = unit
        self.add(usage_id, props)
        return usage_id

    def task_output(self, task: TaskRecord, outputs: list[dict[str, str]]) -> str | None:
        if not task.outputs:
            return None
        files = [self.file(f).id for f in task.outputs]
        param = f"#parameter/{task.task_id}/out"
        self.add(
            param,
            {
                "@type": "FormalParameter",
                "name": f"{task.task_id}.out",
                "additionalType": "Dataset",
                "workExample": ref(self.out_id(task)),
                "conformsTo": ref(FORMAL_PARAMETER),
            },
        )
        outputs.append(ref(param))
        props: dict[str, Any] = {
            "@type": "Dataset",
            "name": f"output of task {task.task_id}",
            "hasPart": [ref(f) for f in files],
            "exampleOfWork": ref(param),
        }
        derived = []
        for source_run, units in sorted(task.reused.items()):
            origin = f"#reused/{task.task_id}/{source_run}"
            self.add(
                origin,
                {
                    "@type": "CreativeWork",
                    "name": f"{reused_count(units)} units of {task.task_id} computed by run "
                    f"{source_run}",
                    "identifier": source_run,
                    "description": "reused, not computed again: "
                    + reused_text(units, task.units_total),
                },
            )
            derived.append(ref(origin))
        if derived:
            props["wasDerivedFrom"] = derived
        return self.folder(f"tasks/{task.task_id}/out/", props)

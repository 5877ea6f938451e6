"""The RO-Crate metadata of a run, made with the `rocrate` library.

The run is a Provenance Run Crate (so a Workflow Run Crate and a Process Run Crate too):
- the workflow (`workflow.json`) is the main entity, a `ComputationalWorkflow` and `HowTo`
  whose `hasPart` are its tools (one `SoftwareApplication` per task type, with the plugin's
  version and code digest) and whose `step`s are `HowToStep`s, one per task, in DAG order;
- its inputs are `FormalParameter`s, one per task setting, realised by `PropertyValue`s;
  its outputs one per task, realised by the task's `out/` directory (a `Dataset`);
- the run is a `CreateAction` of the workflow (agent, times, final state, message); each task
  a `CreateAction` of its tool, with a `ControlAction` of its step; simrun's own execution an
  `OrganizeAction` that ties them together;
- every file carries its `contentSize` and `sha256`; units reused from earlier runs are
  recorded on the task's output with `wasDerivedFrom` (which units, which run).
"""

from __future__ import annotations

import json
import mimetypes
from datetime import datetime
from typing import Any

from rocrate.model.contextentity import ContextEntity
from rocrate.rocrate import ROCrate

from runs.crates.profiles import CRATE_VERSION, DECLARED, EXTRA_TERMS, WORKFLOW_RO_CRATE
from runs.crates.record import MadeFile, RunRecord, StoredFile, TaskRecord, Written

WORKFLOW_FILE = "workflow.json"
LANGUAGE_ID = "#simrun-workflow-language"
ENGINE_ID = "#simrun"
RUN_ACTION_ID = "#run"
ENVIRONMENT_ID = "#environment"
LICENSE_ID = "#license"
FORMAL_PARAMETER = "https://bioschemas.org/profiles/FormalParameter/1.0-RELEASE"
_COMPLETED, _FAILED = (
    "http://schema.org/CompletedActionStatus",
    "http://schema.org/FailedActionStatus",
)
_ACTIVE = "http://schema.org/ActiveActionStatus"
_UNITS = {  # QUDT units of the resource figures; counts are dimensionless
    "peak_memory_gb": "https://qudt.org/vocab/unit/GigaBYTE",
    "unit_seconds_median": "https://qudt.org/vocab/unit/SEC",
}


def _ref(entity_id: str) -> dict[str, str]:
    return {"@id": entity_id}


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _status(state: str) -> str:
    if state in ("succeeded", "done"):
        return _COMPLETED
    if state in ("failed", "cancelled", "skipped"):
        return _FAILED
    return _ACTIVE


def _value_type(value: Any) -> str:
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, int):
        return "Integer"
    if isinstance(value, float):
        return "Float"
    if isinstance(value, str):
        return "Text"
    return "PropertyValue"  # a list or a mapping: structured, its value as JSON


def _file_properties(path: str, written: Written, extra: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = {
        "@type": "File",
        "name": path.rsplit("/", 1)[-1],
        "contentSize": str(written.size),
        "sha256": written.sha256,
        "encodingFormat": mimetypes.guess_type(path)[0] or "application/octet-stream",
    }
    props.update(extra)
    return props


class _Builder:
    def __init__(self, record: RunRecord, written: dict[str, Written], exported_at: datetime):
        self.record = record
        self.written = written
        self.exported_at = exported_at
        self.crate = ROCrate(version=CRATE_VERSION)
        self.crate.metadata.extra_terms.update(EXTRA_TERMS)

    def add(self, entity_id: str, props: dict[str, Any]) -> Any:
        return self.crate.add(ContextEntity(self.crate, entity_id, properties=props))

    def file(self, item: StoredFile | MadeFile, **extra: Any) -> Any:
        props = _file_properties(item.crate_path, self.written[item.crate_path], extra)
        return self.crate.add_file(source=None, dest_path=item.crate_path, properties=props)

    def build(self) -> dict[str, Any]:
        self.root()
        workflow = self.workflow()
        self.crate.mainEntity = workflow
        agent = self.agent()
        inputs = [*self.snapshots(), self.environment()]
        task_actions, controls = self.tasks(workflow, agent)
        self.run_action(workflow.id, agent, inputs)
        self.engine(controls)
        self.crate.root_dataset["mentions"] = [_ref(RUN_ACTION_ID), _ref("#simrun-run")] + [
            _ref(a) for a in task_actions
        ]
        return self.crate.metadata.generate()

    def root(self) -> None:
        """The root dataset: what the crate is, its licence and the profiles it follows."""
        record = self.record
        root = self.crate.root_dataset
        root["name"] = f"simrun run {record.id}: {record.name}"
        root["description"] = (
            record.description or f"The run {record.id} of the workflow {record.name}."
        )
        root["datePublished"] = self.exported_at.isoformat()
        root["identifier"] = f"simrun-run:{record.id}"
        root["license"] = _ref(LICENSE_ID)
        self.add(
            LICENSE_ID,
            {
                "@type": "CreativeWork",
                "name": "Not stated",
                "description": "simrun records no licence for a run: ask its owner before reuse.",
            },
        )
        root["conformsTo"] = [_ref(p.uri) for p in DECLARED]
        for p in DECLARED:
            self.add(p.uri, {"@type": "CreativeWork", "name": p.name, "version": p.version})
        self.crate.metadata["conformsTo"] = [
            _ref(self.crate.metadata.profile),
            _ref(WORKFLOW_RO_CRATE.uri),
        ]

    def run_action(self, workflow: str, agent: str, inputs: list[str]) -> None:
        """The run: the workflow's execution by its agent, its final state and message."""
        record = self.record
        run = self.add(
            RUN_ACTION_ID,
            {
                "@type": "CreateAction",
                "name": f"Run {record.id} of {record.name}",
                "description": f"simrun run {record.id}, ended {record.state}",
                "identifier": record.id,
                "instrument": _ref(workflow),
                "agent": _ref(agent),
                "object": [_ref(i) for i in inputs]
                + [_ref(pv) for t in record.tasks for pv in self.settings_ids(t)],
                "result": [_ref(self.out_id(t)) for t in record.tasks if t.outputs],
                "actionStatus": _ref(_status(record.state)),
                "startTime": _time(record.started_at or record.created_at),
                "endTime": _time(record.ended_at),
            },
        )
        if record.who.acts_for:
            run["participant"] = _ref(self.who_id(record.who.acts_for))
        if record.state != "succeeded" and record.message:
            run["error"] = record.message
        if record.from_crate:
            run["isBasedOn"] = record.from_crate

    def engine(self, controls: list[str]) -> None:
        """simrun's own execution, which ran each step."""
        record = self.record
        self.add(
            "#simrun-run",
            {
                "@type": "OrganizeAction",
                "name": f"simrun running {record.id}",
                "instrument": _ref(ENGINE_ID),
                "object": [_ref(c) for c in controls],
                "result": _ref(RUN_ACTION_ID),
                "actionStatus": _ref(_status(record.state)),
                "startTime": _time(record.created_at),
                "endTime": _time(record.ended_at),
            },
        )
        self.add(
            ENGINE_ID,
            {
                "@type": "SoftwareApplication",
                "name": "simrun",
                "softwareVersion": record.simrun_version,
                "description": "Runs simulation workflows on a cluster or on one machine.",
            },
        )

    def workflow(self) -> Any:
        record = self.record
        self.add(
            LANGUAGE_ID,
            {
                "@type": "ComputerLanguage",
                "name": "simrun workflow",
                "alternateName": "simrun",
                "identifier": "simrun-workflow",
                "description": "A simrun workflow (JSON): tasks of plugin types wired into a DAG.",
            },
        )
        return self.file(
            record.workflow,
            **{
                "@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow", "HowTo"],
                "name": record.name,
                "encodingFormat": "application/json",
                "programmingLanguage": _ref(LANGUAGE_ID),
                "hasPart": [_ref(self.tool_id(t)) for t in sorted(record.tools)],
            },
        )

    def tool_id(self, type_name: str) -> str:
        return f"#type/{type_name}"

    def who_id(self, name: str) -> str:
        return f"#identity/{name}"

    def out_id(self, task: TaskRecord) -> str:
        return f"tasks/{task.task_id}/out/"

    def settings_ids(self, task: TaskRecord) -> list[str]:
        return [f"#setting/{task.task_id}/{key}" for key in sorted(task.settings)]

    def agent(self) -> str:
        who = self.record.who
        agent_id = self.who_id(who.name)
        if who.kind == "agent":
            self.add(
                agent_id,
                {
                    "@type": "SoftwareApplication",
                    "name": who.name,
                    "description": f"an agent identity of simrun acting for {who.acts_for}",
                    "maintainer": _ref(self.who_id(who.acts_for)),
                },
            )
            self.add(self.who_id(who.acts_for), {"@type": "Person", "name": who.acts_for})
        else:
            self.add(
                agent_id,
                {
                    "@type": "Person",
                    "name": who.name,
                    "description": f"simrun's {who.kind} identity {who.name}",
                },
            )
        return agent_id

    def snapshots(self) -> list[str]:
        ids = []
        for position, snap in enumerate(self.record.snapshots):
            files = [self.file(f).id for f in snap.files]
            props: dict[str, Any] = {
                "@type": "Dataset",
                "name": snap.name or f"snapshot {snap.digest[:12]}",
                "description": ("the model's sources" if position == 0 else "sources")
                + f", snapshot {snap.digest}",
                "identifier": snap.digest,
                "hasPart": [_ref(f) for f in files],
                "position": position,
            }
            if snap.git_remote:
                props["codeRepository"] = snap.git_remote
            if snap.git_commit:
                props["version"] = snap.git_commit + (" (dirty)" if snap.git_dirty else "")
            dataset = self.crate.add_dataset(
                source=None, dest_path=f"snapshots/{snap.digest}/", properties=props
            )
            ids.append(dataset.id)
        return ids

    def environment(self) -> str:
        """The environment as a folder of the files it was built from; one built from none
        (simrun's own, for a model without a project) as a contextual entity: a folder the
        crate does not hold would be a data entity missing from its payload."""
        env = self.record.environment
        props: dict[str, Any] = {
            "name": "environment",
            "description": f"The environment the pods ran in: {env.ref} (Python {env.python}, "
            f"simrun-harness {env.harness})",
            "identifier": env.ref,
        }
        if env.local_packages:
            props["description"] += "; local packages: " + ", ".join(
                f"{p.get('name')} {p.get('digest', '')}" for p in env.local_packages
            )
        if not env.files:
            props["@type"] = "SoftwareApplication"
            props["description"] += "; simrun's own, the model having no project file."
            return str(self.add(ENVIRONMENT_ID, props).id)
        files = [self.file(f, about=_ref("environment/")).id for f in env.files]
        props["@type"] = "Dataset"
        props["description"] += "; its project and its lock or constraints file."
        props["hasPart"] = [_ref(f) for f in files]
        return self.crate.add_dataset(source=None, dest_path="environment/", properties=props).id

    def tools(self) -> None:
        """One SoftwareApplication per task type, part of its plugin package."""
        for type_name, tool in sorted(self.record.tools.items()):
            self.add(
                self.tool_id(type_name),
                {
                    "@type": "SoftwareApplication",
                    "name": type_name,
                    "description": tool.description or f"the task type {type_name}",
                    "softwareVersion": tool.version,
                    "identifier": tool.digest or tool.version,
                    "isPartOf": _ref(f"#package/{tool.package}"),
                },
            )
            self.add(
                f"#package/{tool.package}",
                {
                    "@type": "SoftwareApplication",
                    "name": tool.package,
                    "softwareVersion": tool.version,
                },
            )

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
                    "workExample": _ref(self.tool_id(task.type)),
                },
            )
            steps.append(_ref(step.id))
            values = self.settings(task, inputs)
            action_id = self.task_action(task, agent, values, self.task_output(task, outputs))
            actions.append(action_id)
            control = self.add(
                f"#control/{task.task_id}",
                {
                    "@type": "ControlAction",
                    "name": f"step {task.task_id}",
                    "instrument": _ref(step.id),
                    "object": _ref(action_id),
                    "actionStatus": _ref(_status(task.state)),
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
                    "additionalType": _value_type(value),
                    "workExample": _ref(pv_id),
                    "conformsTo": _ref(FORMAL_PARAMETER),
                },
            )
            inputs.append(_ref(param))
            shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            self.add(
                pv_id,
                {
                    "@type": "PropertyValue",
                    "name": key,
                    "value": shown,
                    "exampleOfWork": _ref(param),
                },
            )
            values.append(_ref(pv_id))
        return values

    def task_action(
        self, task: TaskRecord, agent: str, values: list[dict[str, str]], result: str | None
    ) -> str:
        """The task's execution by its tool: what it read, made, when, and what it used."""
        read = [
            _ref(self.out_id(t))
            for t in self.record.tasks
            if t.task_id in task.dependencies and t.outputs
        ]
        action_id = f"#task/{task.task_id}"
        props: dict[str, Any] = {
            "@type": "CreateAction",
            "name": f"task {task.task_id} ({task.type})",
            "description": self.task_description(task),
            "instrument": _ref(self.tool_id(task.type)),
            "agent": _ref(agent),
            "object": values + read,
            "actionStatus": _ref(_status(task.state)),
        }
        if result:
            props["result"] = _ref(result)
        if task.started_at:
            props["startTime"] = _time(task.started_at)
        if task.ended_at:
            props["endTime"] = _time(task.ended_at)
        if task.state != "done" and task.message:
            props["error"] = task.message
        usage = [self.usage(task, name, value) for name, value in sorted(task.usage.items())]
        if usage:
            props["resourceUsage"] = [_ref(u) for u in usage]
        self.add(action_id, props)
        for log in task.logs:
            self.file(log, about=_ref(action_id))
        return action_id

    def task_description(self, task: TaskRecord) -> str:
        text = f"{'split' if task.splittable else 'unsplit'} task of type {task.type}, {task.state}"
        if task.units_total is not None:
            text += f", {task.units_total} units"
        reused = sum(len(units) for units in task.reused.values())
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
        unit = _UNITS.get(name)
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
                "workExample": _ref(self.out_id(task)),
                "conformsTo": _ref(FORMAL_PARAMETER),
            },
        )
        outputs.append(_ref(param))
        props: dict[str, Any] = {
            "@type": "Dataset",
            "name": f"output of task {task.task_id}",
            "hasPart": [_ref(f) for f in files],
            "exampleOfWork": _ref(param),
        }
        derived = []
        for source_run, units in sorted(task.reused.items()):
            origin = f"#reused/{task.task_id}/{source_run}"
            self.add(
                origin,
                {
                    "@type": "CreativeWork",
                    "name": f"{len(units)} units of {task.task_id} computed by run {source_run}",
                    "identifier": source_run,
                    "description": "reused, not computed again: " + ", ".join(sorted(units)),
                },
            )
            derived.append(_ref(origin))
        if derived:
            props["wasDerivedFrom"] = derived
        return self.crate.add_dataset(source=None, dest_path=self.out_id(task), properties=props).id


def crate_metadata(
    record: RunRecord, written: dict[str, Written], *, exported_at: datetime
) -> dict[str, Any]:
    """The crate's `ro-crate-metadata.json` as JSON, from the run's record and the digest and
    size of every file as written."""
    return _Builder(record, written, exported_at).build()

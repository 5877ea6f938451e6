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

A crate made `metadata_only` holds no file of the store (snapshots, outputs, logs): each is
described by a local identifier (`#` and its path) with the path it would have as `localPath`,
as RO-Crate 1.2 describes a file deliberately not present (RO-Crate 1.1 asks that a relative
`@id` be in the payload, and that an absolute one be downloadable; simrun has no address to
give). Its folders too; the workflow and the environment's files are always held.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rocrate.model.contextentity import ContextEntity
from rocrate.rocrate import ROCrate

from runs.crates.jsonld import file_properties, iso_time, ref, status
from runs.crates.profiles import (
    CRATE_VERSION,
    DECLARED,
    EXTRA_TERMS,
    LOCAL_PATH_TERM,
    WORKFLOW_RO_CRATE,
)
from runs.crates.record import MadeFile, RunRecord, StoredFile, TaskRecord, Written
from runs.crates.task_entities import TaskEntities
from runs.states import RunState

WORKFLOW_FILE = "workflow.json"
LANGUAGE_ID = "#simrun-workflow-language"
ENGINE_ID = "#simrun"
RUN_ACTION_ID = "#run"
ENVIRONMENT_ID = "#environment"
LICENSE_ID = "#license"


class _Builder(TaskEntities):
    def __init__(
        self,
        record: RunRecord,
        written: dict[str, Written],
        exported_at: datetime,
        metadata_only: bool,
    ):
        self.record = record
        self.written = written
        self.exported_at = exported_at
        self.holds_store = not metadata_only
        self.crate = ROCrate(version=CRATE_VERSION)
        self.crate.metadata.extra_terms.update(EXTRA_TERMS)
        if metadata_only:
            self.crate.metadata.extra_terms.update(LOCAL_PATH_TERM)

    def add(self, entity_id: str, props: dict[str, Any]) -> Any:
        return self.crate.add(ContextEntity(self.crate, entity_id, properties=props))

    def stored_id(self, path: str) -> str:
        """The id of a file or folder of the store: its path in the crate, or a local
        identifier when the crate does not hold it (metadata only)."""
        return path if self.holds_store else f"#{path}"

    def file(self, item: StoredFile | MadeFile, **extra: Any) -> Any:
        props = file_properties(item.crate_path, self.written[item.crate_path], extra)
        if isinstance(item, StoredFile) and not self.holds_store:
            props["localPath"] = item.crate_path
            return self.add(self.stored_id(item.crate_path), props)
        return self.crate.add_file(source=None, dest_path=item.crate_path, properties=props)

    def folder(self, path: str, props: dict[str, Any]) -> str:
        """A folder of the store (a snapshot, a task's output), as `file` makes its files."""
        if not self.holds_store:
            return str(self.add(self.stored_id(path), {**props, "localPath": path}).id)
        return str(self.crate.add_dataset(source=None, dest_path=path, properties=props).id)

    def build(self) -> dict[str, Any]:
        self.root()
        workflow = self.workflow()
        self.crate.mainEntity = workflow
        agent = self.agent()
        inputs = [*self.snapshots(), self.environment()]
        task_actions, controls = self.tasks(workflow, agent)
        self.run_action(workflow.id, agent, inputs)
        self.engine(controls)
        self.crate.root_dataset["mentions"] = [ref(RUN_ACTION_ID), ref("#simrun-run")] + [
            ref(a) for a in task_actions
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
        root["license"] = ref(LICENSE_ID)
        self.add(
            LICENSE_ID,
            {
                "@type": "CreativeWork",
                "name": "Not stated",
                "description": "simrun records no licence for a run: ask its owner before reuse.",
            },
        )
        root["conformsTo"] = [ref(p.uri) for p in DECLARED]
        for p in DECLARED:
            self.add(p.uri, {"@type": "CreativeWork", "name": p.name, "version": p.version})
        self.crate.metadata["conformsTo"] = [
            ref(self.crate.metadata.profile),
            ref(WORKFLOW_RO_CRATE.uri),
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
                "instrument": ref(workflow),
                "agent": ref(agent),
                "object": [ref(i) for i in inputs]
                + [ref(pv) for t in record.tasks for pv in self.settings_ids(t)],
                "result": [ref(self.out_id(t)) for t in record.tasks if t.outputs],
                "actionStatus": ref(status(record.state)),
                "startTime": iso_time(record.started_at or record.created_at),
                "endTime": iso_time(record.ended_at),
            },
        )
        if record.who.acts_for:
            run["participant"] = ref(self.who_id(record.who.acts_for))
        if record.state != RunState.SUCCEEDED and record.message:
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
                "instrument": ref(ENGINE_ID),
                "object": [ref(c) for c in controls],
                "result": ref(RUN_ACTION_ID),
                "actionStatus": ref(status(record.state)),
                "startTime": iso_time(record.created_at),
                "endTime": iso_time(record.ended_at),
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
                "programmingLanguage": ref(LANGUAGE_ID),
                "hasPart": [ref(self.tool_id(t)) for t in sorted(record.tools)],
            },
        )

    def tool_id(self, type_name: str) -> str:
        return f"#type/{type_name}"

    def who_id(self, name: str) -> str:
        return f"#identity/{name}"

    def out_id(self, task: TaskRecord) -> str:
        return self.stored_id(f"tasks/{task.task_id}/out/")

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
                    "maintainer": ref(self.who_id(who.acts_for)),
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
                "hasPart": [ref(f) for f in files],
                "position": position,
            }
            if snap.git_remote:
                props["codeRepository"] = snap.git_remote
            if snap.git_commit:
                props["version"] = snap.git_commit + (" (dirty)" if snap.git_dirty else "")
            ids.append(self.folder(f"snapshots/{snap.digest}/", {"@type": "Dataset", **props}))
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
        files = [self.file(f, about=ref("environment/")).id for f in env.files]
        props["@type"] = "Dataset"
        props["description"] += "; its project and its lock or constraints file."
        props["hasPart"] = [ref(f) for f in files]
        return self.crate.add_dataset(source=None, dest_path="environment/", properties=props).id

    def tools(self) -> None:
        """One SoftwareApplication per task type, part of its plugin package: the version and
        code digest the run used (the keys of its tasks)."""
        for type_name, tool in sorted(self.record.tools.items()):
            description = tool.description or f"the task type {type_name}"
            if not tool.as_used:
                description += (
                    " (its version as installed when the crate was made: the run recorded none)"
                )
            self.add(
                self.tool_id(type_name),
                {
                    "@type": "SoftwareApplication",
                    "name": type_name,
                    "description": description,
                    "softwareVersion": tool.version,
                    "identifier": tool.digest or tool.version,
                    "isPartOf": ref(f"#package/{tool.package}"),
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


def crate_metadata(
    record: RunRecord,
    written: dict[str, Written],
    *,
    exported_at: datetime,
    metadata_only: bool = False,
) -> dict[str, Any]:
    """The crate's `ro-crate-metadata.json` as JSON, from the run's record and the digest and
    size of every file as written (or, `metadata_only`, as read: the store's files are then
    described, not held)."""
    return _Builder(record, written, exported_at, metadata_only).build()

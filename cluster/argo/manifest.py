"""The Argo Workflow of a run, built with hera's models: one DAG, one pod per DAG node.

DAG (M1, M2, M11): an unsplit task is one DAG task; a split task is its coordinator
`<task>-w0`, its extra workers `<task>-extra` (`withSequence` from 1, `continueOn` failed and
error, left out for one pod) and its merge `<task>-merge`, which depends on the coordinator
only (absent when the coordinator merges).

A shape per pod: each pod's template carries its own resources and patch. The coordinator's
template is `<task>-worker`; extra workers whose shape differs from it run `<task>-worker-<k>`,
one template per shape, and the extras of one shape (consecutive in the plan) are one DAG task
`<task>-extra` (the first group) or `<task>-extra-<k>`, each a `withSequence` over their
indices. The merge's template `<task>-merge` has the merge's shape.

A task reading a split task waits for its merge (or its coordinator when that merges). Every
DAG task passes its pod's name (`pod`, as the controller names it: `<task>`, `<task>-w<i>`,
`<task>-merge`) and task id (`task`) to its template, so the status can name pods from the
spec alone (`cluster/argo/status.py`).

Every pod's template: `cluster/argo/pod_template.py`.

The Argo features this relies on, and where Argo implements them: docs/argo-backend.md.
"""

from __future__ import annotations

from typing import Any

from hera.workflows import Workflow
from hera.workflows import models as m

from cluster.argo.config import ClusterConfig
from cluster.argo.names import argo_name, label_value
from cluster.argo.pod_template import SCRATCH_VOLUME, STORE_VOLUME, pod_template
from runs.plans import PodShape, merge_pod, worker_pod
from runs.ports import RunLaunch, TaskLaunch

RUN_LABEL = "simrun/run"
GROUP_KEY = "simrun/group"
RESERVED_KEY = "simrun/reserved"
ENTRYPOINT = "run"
WORKER_COMMAND = "simrun-worker"
MERGE_COMMAND = "simrun-merge"
EXEC_COMMAND = "simrun-exec"


def _arguments(pod: str, task: TaskLaunch, **more: str) -> m.Arguments:
    values = {"pod": pod, "task": task.task_id, **more}
    return m.Arguments(parameters=[m.Parameter(name=k, value=v) for k, v in values.items()])


def waited_for(task: TaskLaunch) -> str:
    """M11: the DAG task a reader of `task` depends on: its merge (or merging coordinator)."""
    base = argo_name(task.task_id)
    if not task.splittable:
        return base
    return worker_pod(base, 0) if task.plan.coordinator_merges else merge_pod(base)


def _task_nodes(
    launch: RunLaunch, task: TaskLaunch, config: ClusterConfig, after: list[str] | None
) -> tuple[list[m.Template], list[m.DAGTask]]:
    """The templates and DAG tasks of one task of the run."""
    base = argo_name(task.task_id)
    plan = task.plan
    if not task.splittable:
        command = list(task.command) if task.command is not None else [EXEC_COMMAND]
        template = pod_template(
            f"{base}-pod",
            launch,
            task,
            config,
            shape=plan.shape,
            command=command,
            priority=plan.base_priority,
        )
        dag = m.DAGTask(
            name=base,
            template=template.name,
            dependencies=after,
            arguments=_arguments(task.task_id, task),
        )
        return [template], [dag]
    templates, tasks = _workers(launch, task, config, after)
    if not plan.coordinator_merges:
        merge = pod_template(
            merge_pod(base),
            launch,
            task,
            config,
            shape=plan.shape_of(None),
            command=[MERGE_COMMAND],
            priority=plan.base_priority,
        )
        templates.append(merge)
        tasks.append(
            m.DAGTask(
                name=merge_pod(base),
                template=merge.name,
                dependencies=[worker_pod(base, 0)],
                arguments=_arguments(merge_pod(task.task_id), task),
            )
        )
    return templates, tasks


def extra_groups(shapes: tuple[PodShape, ...]) -> list[tuple[int, int, PodShape]]:
    """The extra workers of a plan as runs of one shape: (first index, count, shape), indices
    from 1 (the coordinator is 0)."""
    groups: list[tuple[int, int, PodShape]] = []
    for index, shape in enumerate(shapes, start=1):
        if groups and groups[-1][2] == shape:
            first, count, _ = groups[-1]
            groups[-1] = (first, count + 1, shape)
        else:
            groups.append((index, 1, shape))
    return groups


def _workers(
    launch: RunLaunch, task: TaskLaunch, config: ClusterConfig, after: list[str] | None
) -> tuple[list[m.Template], list[m.DAGTask]]:
    """The coordinator and the extra workers: a template per shape, a DAG task per group."""
    base = argo_name(task.task_id)
    plan = task.plan

    def worker(name: str, shape: PodShape) -> m.Template:
        priority = "{{inputs.parameters.priority}}"
        command = [WORKER_COMMAND]
        return pod_template(
            name, launch, task, config, shape=shape, command=command, priority=priority, worker=True
        )

    templates = [worker(f"{base}-worker", plan.shape)]
    by_shape = {plan.shape: templates[0].name}
    tasks = [
        m.DAGTask(
            name=worker_pod(base, 0),
            template=templates[0].name,
            dependencies=after,
            arguments=_arguments(
                worker_pod(task.task_id, 0), task, priority=plan.base_priority, role="base"
            ),
        )
    ]
    for number, (first, count, shape) in enumerate(extra_groups(plan.extra_shapes)):
        if shape not in by_shape:
            templates.append(worker(f"{base}-worker-{len(by_shape)}", shape))
            by_shape[shape] = templates[-1].name
        tasks.append(
            m.DAGTask(
                name=f"{base}-extra" + (f"-{number + 1}" if number else ""),
                template=by_shape[shape],
                dependencies=after,
                continue_on=m.ContinueOn(failed=True, error=True),
                with_sequence=m.Sequence(
                    start=m.IntOrString(str(first)), count=m.IntOrString(str(count))
                ),
                arguments=_arguments(
                    worker_pod(task.task_id, "{{item}}"),
                    task,
                    priority=plan.extra_priority,
                    role="extra",
                ),
            )
        )
    return templates, tasks


def workflow_manifest(launch: RunLaunch, config: ClusterConfig) -> dict[str, Any]:
    """M1-M13: the Argo Workflow of a run, as a dict ready for the API.

    Raises ValueError when a pod would have no image (B9).
    """
    by_id = {t.task_id: t for t in launch.tasks}
    templates: list[m.Template] = []
    dag_tasks: list[m.DAGTask] = []
    for task in launch.tasks:
        after = [waited_for(by_id[d]) for d in task.dependencies] or None
        made, nodes = _task_nodes(launch, task, config, after)
        templates += made
        dag_tasks += nodes
    templates.insert(0, m.Template(name=ENTRYPOINT, dag=m.DAGTemplate(tasks=dag_tasks)))
    labels = {RUN_LABEL: launch.run_id}
    annotations: dict[str, str] = {}
    if launch.group:
        labels[GROUP_KEY] = label_value(launch.group)
        annotations[GROUP_KEY] = launch.group
    node_selector = tolerations = None
    if launch.reserve:
        reserved = label_value(launch.run_id)
        node_selector = {RESERVED_KEY: reserved}
        # no effect named: the reservation's taint is tolerated whatever its effect (M7)
        tolerations = [m.Toleration(key=RESERVED_KEY, operator="Equal", value=reserved)]
    volumes = [
        m.Volume(
            name=STORE_VOLUME,
            persistent_volume_claim=m.PersistentVolumeClaimVolumeSource(
                claim_name=config.store_claim
            ),
        ),
        m.Volume(
            name=SCRATCH_VOLUME,
            host_path=m.HostPathVolumeSource(path=config.scratch_path, type="DirectoryOrCreate"),
        ),
    ]
    workflow = Workflow(
        name=launch.workflow_name,
        namespace=config.namespace,
        labels=dict(labels),
        annotations=dict(annotations) or None,
        entrypoint=ENTRYPOINT,
        service_account_name=config.service_account,
        pod_metadata=m.Metadata(labels=dict(labels), annotations=dict(annotations) or None),
        templates=list(templates),
        volumes=volumes,
        node_selector=node_selector,
        tolerations=tolerations,
        ttl_strategy=m.TTLStrategy(seconds_after_completion=config.workflow_ttl_s),
    )
    manifest: dict[str, Any] = workflow.to_dict()
    return manifest

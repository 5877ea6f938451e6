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

Every pod (M4-M10, M13): Kueue's queue and priority labels, `priorityClassName`, the
annotation asking for one node per pod, requests = limits, a retry strategy that retries
stopped attempts only (no exit code, 137, 143) up to 100 times, a `podSpecPatch` that gives an
attempt after an exit 137 the retry memory (and memory per worker, processes) and every attempt
the termination grace, the run's directory of the store read-write and the snapshots
read-only, scratch on the node's disk, the harness's environment, the run, task, pod and group
labels. A reserved run's pods select the node's label and tolerate its taint.

The Argo features this relies on, and where Argo implements them: docs/argo-backend.md.
"""

from __future__ import annotations

import json
from typing import Any

from hera.workflows import Workflow
from hera.workflows import models as m

from cluster.argo.config import GRACE_MARGIN_S, RETRY_LIMIT, ClusterConfig
from cluster.argo.images import environment_image
from cluster.argo.names import argo_name, cpu_quantity, label_value, memory_quantity, number_text
from runs.plans import PodShape, merge_pod, worker_pod
from runs.ports import RunLaunch, TaskLaunch
from runs.resources import attempt_memory
from simrun_harness.exits import EXIT_POOL_BROKEN, EXIT_TERMINATED
from simrun_harness.pod_env import pod_env

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
HOSTNAME = "kubernetes.io/hostname"
RUN_LABEL = "simrun/run"
TASK_LABEL = "simrun/task"
POD_LABEL = "simrun/pod"
GROUP_KEY = "simrun/group"
RESERVED_KEY = "simrun/reserved"
GPU = "nvidia.com/gpu"
ENTRYPOINT = "run"
MAIN = "main"
STORE_VOLUME = "store"
SCRATCH_VOLUME = "scratch"
NO_EXIT_CODE = "-1"
"""`lastRetry.exitCode` of an attempt without an exit code (a deleted or lost pod)."""
RETRY_EXPRESSION = " || ".join(
    f"lastRetry.exitCode == '{code}'" for code in (NO_EXIT_CODE, EXIT_POOL_BROKEN, EXIT_TERMINATED)
)
"""M8, K7: only a stopped attempt is retried; expr compares strings ("3" != 3 holds)."""
WORKER_COMMAND = "simrun-worker"
MERGE_COMMAND = "simrun-merge"
EXEC_COMMAND = "simrun-exec"
POD = "{{inputs.parameters.pod}}"


def _per_attempt(retry: str, first: str) -> str:
    """M9: an Argo expression tag: `retry` for an attempt after an exit 137, else `first`."""
    if retry == first:
        return first
    return f"{{{{=lastRetry.exitCode == '{EXIT_POOL_BROKEN}' ? '{retry}' : '{first}'}}}}"


def pod_spec_patch(shape: PodShape, grace_s: int) -> str:
    """M9: the patch of every attempt: the grace, and memory, memory per worker and
    processes, which are the retry values after an exit 137 and the first values otherwise."""
    limit, per_worker, processes = attempt_memory(shape, retried=False)
    if shape.retry_memory_gb > 0:
        retry_limit, retry_per_worker, retry_processes = attempt_memory(shape, retried=True)
    else:
        retry_limit, retry_per_worker, retry_processes = limit, per_worker, processes
    memory = _per_attempt(memory_quantity(retry_limit), memory_quantity(limit))
    values = {
        "SIMRUN_MEMORY_LIMIT_GB": (number_text(retry_limit), number_text(limit)),
        "SIMRUN_MEMORY_PER_WORKER_GB": (
            number_text(retry_per_worker or per_worker),
            number_text(per_worker),
        ),
        "SIMRUN_PROCESSES": (str(retry_processes), str(processes)),
    }
    patch = {
        "terminationGracePeriodSeconds": grace_s + GRACE_MARGIN_S,
        "containers": [
            {
                "name": MAIN,
                "resources": {"requests": {"memory": memory}, "limits": {"memory": memory}},
                "env": [
                    {"name": name, "value": _per_attempt(retry, first)}
                    for name, (retry, first) in values.items()
                ],
            }
        ],
    }
    return json.dumps(patch, sort_keys=True)


def _resources(shape: PodShape) -> m.ResourceRequirements:
    """M4, M13: requests equal to limits; GPUs and ephemeral storage when the shape has them."""
    amounts = {"cpu": cpu_quantity(shape.cores), "memory": memory_quantity(shape.memory_gb)}
    if shape.gpus > 0:
        amounts[GPU] = str(shape.gpus)
    if shape.scratch_gb > 0:
        amounts["ephemeral-storage"] = memory_quantity(shape.scratch_gb)
    return m.ResourceRequirements(
        requests={k: m.Quantity(v) for k, v in amounts.items()},
        limits={k: m.Quantity(v) for k, v in amounts.items()},
    )


def _env(
    launch: RunLaunch, task: TaskLaunch, config: ClusterConfig, shape: PodShape, worker: bool
) -> list[m.EnvVar]:
    """M4, M10: the harness's environment; memory values come from the attempt's patch, the
    node from the pod's spec."""
    run_dir = f"{config.pod_store}/runs/{launch.run_id}"
    values = pod_env(
        run_id=launch.run_id,
        task_id=task.task_id,
        worker=POD,
        attempt="{{retries}}",
        run_dir=run_dir,
        task_dir=f"{run_dir}/tasks/{task.task_id}",
        scratch=config.scratch_path,
        snapshots_dir=f"{config.pod_store}/snapshots",
        grace_s=launch.grace_s,
        cores=shape.cores,
        role="{{inputs.parameters.role}}" if worker else None,
        coordinator_merges=task.plan.coordinator_merges,
        task_env=task.env,
    )
    env = [m.EnvVar(name=k, value=v) for k, v in values.items()]
    node = m.EnvVarSource(field_ref=m.ObjectFieldSelector(field_path="spec.nodeName"))
    env.append(m.EnvVar(name="SIMRUN_NODE", value_from=node))
    return env


def _mounts(launch: RunLaunch, task: TaskLaunch, config: ClusterConfig) -> list[m.VolumeMount]:
    """M4: the run read-write, the snapshots read-only, this pod's scratch directory."""
    run = f"runs/{launch.run_id}"
    return [
        m.VolumeMount(name=STORE_VOLUME, mount_path=f"{config.pod_store}/{run}", sub_path=run),
        m.VolumeMount(
            name=STORE_VOLUME,
            mount_path=f"{config.pod_store}/snapshots",
            sub_path="snapshots",
            read_only=True,
        ),
        m.VolumeMount(
            name=SCRATCH_VOLUME,
            mount_path=config.scratch_path,
            sub_path=f"{launch.run_id}/{task.task_id}/{POD}",
        ),
    ]


def _template(
    name: str,
    launch: RunLaunch,
    task: TaskLaunch,
    config: ClusterConfig,
    *,
    shape: PodShape,
    command: list[str],
    priority: str,
    worker: bool = False,
) -> m.Template:
    """A pod template of `shape`: Kueue metadata, resources, retries and the per-attempt
    patch."""
    parameters = ["pod", "task"] + (["priority", "role"] if worker else [])
    image = task.image if task.command is not None and task.image else None
    return m.Template(
        name=name,
        inputs=m.Inputs(parameters=[m.Parameter(name=p) for p in parameters]),
        metadata=m.Metadata(
            labels={
                QUEUE_LABEL: config.queue,
                PRIORITY_LABEL: priority,
                TASK_LABEL: label_value(task.task_id),
                POD_LABEL: POD,
            },
            annotations={TOPOLOGY_ANNOTATION: HOSTNAME},
        ),
        priority_class_name=priority,
        container=m.Container(
            name=MAIN,
            image=image or environment_image(launch.environment, config),
            command=command,
            env=_env(launch, task, config, shape, worker),
            resources=_resources(shape),
            volume_mounts=_mounts(launch, task, config),
        ),
        retry_strategy=m.RetryStrategy(
            limit=m.IntOrString(RETRY_LIMIT),
            retry_policy="Always",
            expression=RETRY_EXPRESSION,
        ),
        pod_spec_patch=pod_spec_patch(shape, launch.grace_s),
    )


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
        template = _template(
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
        merge = _template(
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
        return _template(
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

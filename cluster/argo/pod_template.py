"""The template of one pod of a run's Argo Workflow (M4-M10, M13), built with hera's models.

Every pod (M4-M10, M13): Kueue's queue and priority labels, `priorityClassName`, the
annotation asking for one node per pod, requests = limits, a retry strategy that retries
stopped attempts only (no exit code, 137, 143) up to 100 times, a `podSpecPatch` that gives an
attempt after an exit 137 the retry memory (and memory per worker, processes) and every attempt
the termination grace, the run's directory of the store read-write and the snapshots
read-only, scratch on the node's disk, the harness's environment, the run, task, pod and group
labels. A reserved run's pods select the node's label and tolerate its taint.
"""

from __future__ import annotations

import json

from hera.workflows import models as m

from cluster.argo.config import GRACE_MARGIN_S, RETRY_LIMIT, ClusterConfig
from cluster.argo.images import environment_image
from cluster.argo.names import cpu_quantity, label_value, memory_quantity, number_text
from runs.plans import PodShape
from runs.ports import RunLaunch, TaskLaunch
from runs.resources import attempt_memory
from simrun_harness.exits import EXIT_POOL_BROKEN, EXIT_TERMINATED
from simrun_harness.pod_env import pod_env

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
HOSTNAME = "kubernetes.io/hostname"
TASK_LABEL = "simrun/task"
POD_LABEL = "simrun/pod"
GPU = "nvidia.com/gpu"
MAIN = "main"
STORE_VOLUME = "store"
SCRATCH_VOLUME = "scratch"
NO_EXIT_CODE = "-1"
"""`lastRetry.exitCode` of an attempt without an exit code (a deleted or lost pod)."""
RETRY_EXPRESSION = " || ".join(
    f"lastRetry.exitCode == '{code}'" for code in (NO_EXIT_CODE, EXIT_POOL_BROKEN, EXIT_TERMINATED)
)
"""M8, K7: only a stopped attempt is retried; expr compares strings ("3" != 3 holds)."""
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


def pod_template(
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

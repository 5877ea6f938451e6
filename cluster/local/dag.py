"""The rules of a local run: which pod may start, what its phase is, how it is retried.

Plain functions of the launch and the attempts read from the store; the backend only reads
files, calls these, and acts on the answer. The rules follow Argo's as the cluster shows them:

- a task starts when the tasks it reads are done: a split task when its merge succeeded (or
  its coordinator, when that merges itself), an unsplit task when its pod succeeded; the merge
  of a split task waits for the coordinator only;
- only a stopped attempt is retried (no exit code, 137, 143), at most `RETRY_LIMIT` times, and
  never one killed for memory at the retry memory (the run fails: C7); any
  other exit fails the pod at once; after an exit 137 the next attempt gets the retry memory,
  after anything else the first memory (as Argo's `lastRetry` only knows the last attempt);
- after a failure no pod that still waits for its dependencies is started (Argo's fail-fast);
  a stopped or cancelled run starts nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cluster.local.attempts import Attempt
from cluster.local.launches import PodSpec, pod_shape, run_pods
from runs.plans import Node, PodShape
from runs.ports import (
    ENDED_PHASES,
    AttemptFailure,
    BackendStatus,
    PodPhase,
    PodStatus,
    RunLaunch,
    WorkflowPhase,
)
from simrun_harness.exits import EXIT_POOL_BROKEN, EXIT_TERMINATED

RETRY_LIMIT = 100  # retries after the first attempt, as Argo's retryStrategy.limit
RETRIED_EXITS = frozenset({None, EXIT_POOL_BROKEN, EXIT_TERMINATED})
OOM_MESSAGE = f"main: OOMKilled (exit code {EXIT_POOL_BROKEN})"


@dataclass(frozen=True)
class PodView:
    """A pod with its attempts and what the rules make of them."""

    spec: PodSpec
    attempts: tuple[Attempt, ...]
    phase: PodPhase
    message: str = ""

    @property
    def last(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def running(self) -> bool:
        return self.phase is PodPhase.RUNNING

    @property
    def startable(self) -> bool:
        """Whether it waits for resources to start its next attempt."""
        return self.phase in (PodPhase.QUEUED, PodPhase.PREEMPTED, PodPhase.RETRYING)


def is_retried(exit_code: int | None) -> bool:
    """Whether an attempt that ended with `exit_code` is retried: only a stopped one."""
    return exit_code in RETRIED_EXITS


def killed_at_retry_memory(attempts: Sequence[Attempt]) -> bool:
    """C7 here too: an attempt killed for memory that ran at the retry memory (the one
    before it exited 137) is not retried; the run fails, and no attempt starts after it."""
    if len(attempts) < 2:
        return False
    last, before = attempts[-1].exit, attempts[-2].exit
    return (
        last is not None
        and before is not None
        and last.oom_killed
        and attempts[-1].eviction is None
        and before.exit_code == EXIT_POOL_BROKEN
    )


def was_evicted(attempt: Attempt) -> bool:
    """Whether an ended attempt was stopped from outside (preempted, lost, SIGTERM)."""
    assert attempt.exit is not None
    return (
        attempt.eviction is not None
        or attempt.exit.lost
        or attempt.exit.exit_code == EXIT_TERMINATED
    )


def retried_for_memory(shape: PodShape, attempts: Sequence[Attempt]) -> bool:
    """Whether the next attempt runs at the retry memory: the last one exited 137."""
    last = attempts[-1] if attempts else None
    return (
        last is not None
        and last.exit is not None
        and last.exit.exit_code == EXIT_POOL_BROKEN
        and shape.retry_memory_gb > 0
    )


def next_memory(shape: PodShape, attempts: Sequence[Attempt]) -> tuple[float, float]:
    """The memory limit and memory per worker of the next attempt, in GiB."""
    if retried_for_memory(shape, attempts):
        return shape.retry_memory_gb, shape.retry_per_worker_gb or shape.per_worker_gb
    return shape.memory_gb, shape.per_worker_gb


def next_processes(shape: PodShape, attempts: Sequence[Attempt]) -> int:
    """M9: the unit processes of the next attempt: fewer at a retry memory the node capped."""
    return shape.retry_processes if retried_for_memory(shape, attempts) else shape.processes


def failure_message(attempt: Attempt) -> str:
    """What an ended attempt died of, worded like Argo's node messages."""
    assert attempt.exit is not None
    code = attempt.exit.exit_code
    if attempt.exit.oom_killed:
        return OOM_MESSAGE
    if attempt.exit.lost:
        return f"pod deleted: {attempt.exit.message or 'lost'} (no exit code)"
    if attempt.eviction is not None:
        return f"pod deleted: {attempt.eviction.reason} (exit code {code})"
    return f"main: Error (exit code {code})"


def failures(attempts: Sequence[Attempt]) -> list[AttemptFailure]:
    """The failed attempts of a pod, oldest first."""
    return [
        AttemptFailure(a.number, a.exit.exit_code, a.exit.oom_killed, failure_message(a))
        for a in attempts
        if a.exit is not None and a.exit.exit_code != 0
    ]


def pod_phase(
    attempts: Sequence[Attempt], *, ready: bool, blocked: bool, halted: bool, fail_fast: bool
) -> tuple[PodPhase, str]:
    """The phase of a pod and a message saying why.

    `ready`: its dependencies are done; `blocked`: one of them failed; `halted`: the run was
    stopped or cancelled; `fail_fast`: a pod of the run failed.
    """
    last = attempts[-1] if attempts else None
    if last is not None:
        if last.exit is None:
            return PodPhase.RUNNING, ""
        code = last.exit.exit_code
        if code == 0:
            return PodPhase.SUCCEEDED, ""
        message = failure_message(last)
        if halted:
            return PodPhase.FAILED, f"{message}; the workflow was stopped"
        if not is_retried(code):
            return PodPhase.FAILED, message
        if killed_at_retry_memory(attempts):
            return PodPhase.FAILED, f"{message} again at the retry memory: not retried"
        if len(attempts) > RETRY_LIMIT:
            return PodPhase.FAILED, f"{message}; no retries left ({RETRY_LIMIT})"
        phase = PodPhase.PREEMPTED if was_evicted(last) else PodPhase.RETRYING
        return phase, message
    if halted:
        return PodPhase.SKIPPED, "the workflow was stopped"
    if blocked:
        return PodPhase.SKIPPED, "a dependency failed"
    if not ready:
        if fail_fast:
            return PodPhase.SKIPPED, "another task failed"
        return PodPhase.WAITING, ""
    return PodPhase.QUEUED, ""


def task_outcome(pods: Sequence[PodView], coordinator_merges: bool) -> str:
    """`done`, `failed` or `open` for the pods of one task."""
    by_kind = {p.spec.kind: p for p in pods if not p.spec.extra}
    if "command" in by_kind or "exec" in by_kind:
        decisive = [next(iter(by_kind.values()))]
    elif coordinator_merges:
        decisive = [by_kind["coordinator"]]
    else:
        decisive = [by_kind["coordinator"], by_kind["merge"]]
    final = decisive[-1]
    if final.phase is PodPhase.SUCCEEDED:
        return "done"
    if any(p.phase in (PodPhase.FAILED, PodPhase.SKIPPED) for p in decisive):
        return "failed"
    return "open"


def run_views(
    launch: RunLaunch, attempts: dict[str, list[Attempt]], *, halted: bool
) -> list[PodView]:
    """Every pod of a run with its phase, tasks taken in their (topological) order."""
    specs = run_pods(launch)
    outcomes: dict[str, str] = {}
    views: list[PodView] = []
    fail_fast = False
    for task in launch.tasks:
        deps = [outcomes.get(d, "open") for d in task.dependencies]
        ready = all(d == "done" for d in deps)
        blocked = any(d == "failed" for d in deps)
        mine: list[PodView] = []
        for spec in (s for s in specs if s.task_id == task.task_id):
            pod_ready, pod_blocked = ready, blocked
            if spec.kind == "merge":
                coordinator = mine[0]
                pod_ready = coordinator.phase is PodPhase.SUCCEEDED
                pod_blocked = coordinator.phase in (PodPhase.FAILED, PodPhase.SKIPPED)
            found = attempts.get(spec.name, [])
            phase, message = pod_phase(
                found, ready=pod_ready, blocked=pod_blocked, halted=halted, fail_fast=fail_fast
            )
            mine.append(PodView(spec, tuple(found), phase, message))
            if phase is PodPhase.FAILED and not spec.extra:
                fail_fast = True
        outcomes[task.task_id] = task_outcome(mine, task.plan.coordinator_merges)
        views.extend(mine)
    return views


def workflow_phase(views: Sequence[PodView], *, halted: bool) -> tuple[WorkflowPhase, str]:
    """The phase of the whole workflow and, when it failed, which pod failed of what."""
    if halted:
        return WorkflowPhase.STOPPED, "stopped"
    failed = [v for v in views if v.phase is PodPhase.FAILED and not v.spec.extra]
    if all(v.phase in ENDED_PHASES for v in views):
        if failed:
            return WorkflowPhase.FAILED, f"pod {failed[0].spec.name} failed: {failed[0].message}"
        return WorkflowPhase.SUCCEEDED, ""
    if any(v.attempts for v in views):
        return WorkflowPhase.RUNNING, ""
    return WorkflowPhase.PENDING, ""


def fit_message(shape: PodShape, attempts: Sequence[Attempt], node: Node) -> str:
    """Why a waiting pod can never start on the node, '' when it fits."""
    memory, _ = next_memory(shape, attempts)
    if shape.cores <= node.cores + 1e-9 and memory <= node.memory_gb + 1e-9:
        return ""
    return (
        f"needs {shape.cores:g} cores and {memory:g} GiB; "
        f"node {node.name} has {node.cores:g} cores and {node.memory_gb:g} GiB"
    )


def backend_status(
    launch: RunLaunch, views: Sequence[PodView], node: Node, *, halted: bool
) -> BackendStatus:
    """The status the controller reads: per pod, failures per pod, the workflow's phase."""
    phase, message = workflow_phase(views, halted=halted)
    pods = {}
    for v in views:
        note = v.message
        if v.startable:
            shape = pod_shape(launch.task(v.spec.task_id), v.spec)
            note = "; ".join(m for m in (note, fit_message(shape, v.attempts, node)) if m)
        pods[v.spec.name] = PodStatus(
            name=v.spec.name,
            phase=v.phase,
            attempts=len(v.attempts),
            node=node.name if v.attempts else None,
            exit_code=None if v.last is None or v.last.exit is None else v.last.exit.exit_code,
            message=note,
        )
    failed = {v.spec.name: failures(v.attempts) for v in views}
    return BackendStatus(
        phase=phase, pods=pods, failures={k: f for k, f in failed.items() if f}, message=message
    )

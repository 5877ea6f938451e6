"""The workers of a task (S9): from the pods the controller stores, the reports, the ledger.

A worker is one pod of a task: `<task>-w0` (the coordinator), `<task>-w1..` (extra workers),
`<task>-merge`, or `<task>` for an unsplit task. What it shows:

- state: while a pod lives whose current attempt has no report yet, the pod's phase
  (running, queued, preempted, retrying); else from its last report: failed when it was
  killed for memory or exited non-zero, else done; waiting when nothing is known yet.
- node: of the live attempt (None while it is not bound), else of the last report.
- attempts: one more than the highest attempt of its reports and of its live pod.
- units done: the distinct units its `unit_done` progress lines name, over all attempts.
- units claimed: the units it holds in the ledger now.
"""

from __future__ import annotations

from dataclasses import dataclass

from runs.models import Run, StoredPod, Task
from runs.plans import merge_pod, worker_index, worker_pod
from runs.ports import PodPhase
from runs.reuse_plans import count_reused
from runs.selectors.progress_lines import unit_lines
from runs.states import TaskState
from runs.store import reports, task_paths
from simrun_harness.ledger_reads import claims_by_worker
from simrun_harness.report import WorkerReport

LIVE_PHASES = frozenset({PodPhase.QUEUED, PodPhase.RUNNING, PodPhase.PREEMPTED, PodPhase.RETRYING})
_ENDED_WITHOUT_REPORT: dict[str, TaskState] = {
    PodPhase.SUCCEEDED: TaskState.DONE,
    PodPhase.FAILED: TaskState.FAILED,
    PodPhase.SKIPPED: TaskState.SKIPPED,
}


@dataclass(frozen=True)
class WorkerView:
    worker: str
    role: str
    state: str
    node: str | None
    attempts: int
    processes: int | None
    units_done: int
    units_claimed: int
    peak_memory_gb: float | None
    memory_limit_gb: float | None
    oom_killed: bool
    exit_code: int | None
    error: str | None
    units_reused: int = 0
    """Units the coordinator linked from earlier runs instead of computing them."""


def role_of(task: Task, worker: str) -> str:
    """base (coordinator), extra, merge, or exec (the single pod of an unsplit task)."""
    if worker == merge_pod(task.task_id):
        return "merge"
    if worker == worker_pod(task.task_id, 0):
        return "base"
    if task.splittable:
        return "extra"
    return "exec"


def _belongs(task: Task, pod: str) -> bool:
    if not task.splittable:
        return pod == task.task_id
    return pod == merge_pod(task.task_id) or worker_index(task.task_id, pod) is not None


def _worker_order(task_id: str, name: str) -> tuple[int, int, str]:
    """The coordinator, the extra workers by number, anything else, the merge last."""
    index = worker_index(task_id, name)
    if index is not None:
        return (0, index, name)
    return (1 if name == merge_pod(task_id) else 0, 0, name)


def task_workers(run: Run, task: Task) -> list[WorkerView]:
    """The workers of one task of a run, coordinator first, the merge last."""
    paths = task_paths(run.id, task.task_id)
    by_worker: dict[str, list[WorkerReport]] = {}
    for _, report in reports(paths):
        by_worker.setdefault(report.worker, []).append(report)
    pods: dict[str, StoredPod] = {
        name: pod for name, pod in (run.pods or {}).items() if _belongs(task, name)
    }
    claims = claims_by_worker(paths) if task.splittable else {}
    done = unit_lines(task).units_by_worker() if task.splittable else {}
    names = set(by_worker) | set(pods) | set(claims) | set(done)
    reused = sum(count_reused(units) for units in (task.reused or {}).values())
    return [
        _view(
            task,
            name,
            sorted(by_worker.get(name, []), key=lambda r: r.attempt),
            pods.get(name),
            units_done=done.get(name, 0),
            units_claimed=claims.get(name, 0),
            units_reused=reused if name == worker_pod(task.task_id, 0) else 0,
        )
        for name in sorted(names, key=lambda name: _worker_order(task.task_id, name))
    ]


def _view(
    task: Task,
    name: str,
    worker_reports: list[WorkerReport],
    pod: StoredPod | None,
    *,
    units_done: int,
    units_claimed: int,
    units_reused: int = 0,
) -> WorkerView:
    last = worker_reports[-1] if worker_reports else None
    reported = {r.attempt for r in worker_reports}
    pod_attempts = int(pod.get("attempts") or 0) if pod else 0
    live_attempt = pod_attempts - 1
    phase = str(pod.get("phase", "")) if pod else ""
    live = phase in LIVE_PHASES and live_attempt not in reported
    attempts = max(pod_attempts, (last.attempt + 1) if last else 0)
    if live:
        state, node = phase, pod.get("node") if pod else None
    elif last is not None:
        failed = last.oom_kills > 0 or last.exit_code != 0
        state = TaskState.FAILED if failed else TaskState.DONE
        node = last.node
    else:
        state = _ENDED_WITHOUT_REPORT.get(phase, TaskState.WAITING)
        node = pod.get("node") if pod else None
    return WorkerView(
        worker=name,
        role=role_of(task, name),
        state=state,
        node=node,
        attempts=attempts,
        processes=last.processes if last else None,
        units_done=units_done,
        units_claimed=units_claimed,
        peak_memory_gb=last.peak_memory_gb if last else None,
        memory_limit_gb=last.memory_limit_gb if last else None,
        oom_killed=bool(last and last.oom_kills > 0),
        exit_code=last.exit_code if last else pod.get("exit_code") if pod else None,
        error=last.error.message if last and last.error else None,
        units_reused=units_reused if task.splittable else 0,
    )


def run_workers(run: Run) -> dict[str, list[WorkerView]]:
    """The workers of every task of a run, by task id."""
    return {task.task_id: task_workers(run, task) for task in run.tasks.all()}

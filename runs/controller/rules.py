"""The controller's rules (docs/architecture.md), each a plain function of plain values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from runs.plans import merge_pod, task_pods, worker_index, worker_pod
from runs.ports import AttemptFailure, BackendStatus, PodPhase, PodStatus
from runs.states import RunState, TaskState
from simrun_harness.exits import EXIT_POOL_BROKEN, EXIT_STORE, EXIT_TERMINATED

STOPPED_EXITS = frozenset({None, EXIT_POOL_BROKEN, EXIT_TERMINATED})

# the task states by their short names, as the rules below read them
WAITING, QUEUED, RUNNING, PREEMPTED, RETRYING = (
    TaskState.WAITING,
    TaskState.QUEUED,
    TaskState.RUNNING,
    TaskState.PREEMPTED,
    TaskState.RETRYING,
)
DONE, FAILED, SKIPPED, CANCELLED = (
    TaskState.DONE,
    TaskState.FAILED,
    TaskState.SKIPPED,
    TaskState.CANCELLED,
)
FINAL = frozenset(TaskState.final())


def base_pods(task_id: str, *, splittable: bool, coordinator_merges: bool) -> list[str]:
    """The pods whose failure fails the task (C3): never an extra worker."""
    if not splittable:
        return [task_id]
    return [worker_pod(task_id, 0)] + ([] if coordinator_merges else [merge_pod(task_id)])


def is_oom(failure: AttemptFailure, reported_kills: int = 0) -> bool:
    """C8: only the OOM killer's evidence counts: the backend's OOMKilled or killed counted."""
    return failure.oom_killed or (failure.exit_code == EXIT_POOL_BROKEN and reported_kills > 0)


@dataclass(frozen=True)
class Verdict:
    """Why a pod's attempts fail its task now, whatever retries the engine would still make."""

    pod: str
    message: str
    attempt: int | None = None  # the attempt whose exit (or kill for memory) failed the task
    exit_code: int | None = None
    memory: bool = False  # killed for memory at the retry memory (its cause: `memory_cause`)
    limit_gb: float | None = None  # the memory it was killed at (a kill for memory)


def fatal_failure(
    pod: str,
    failures: Sequence[AttemptFailure],
    *,
    oom_attempts: frozenset[int],
    retry_memory_gb: float,
) -> Verdict | None:
    """C7, K7, K9: the failure of a base pod's attempts that ends its task, if any.

    - an exit other than a stop (no code, 137, 143) fails at once;
    - a kill for memory in an attempt that ran with the retry memory (its previous attempt
      exited 137) fails; one after a preemption ran with the first memory and is retried.
    """
    by_attempt = {f.attempt: f for f in failures}
    for failure in sorted(failures, key=lambda f: f.attempt):
        if failure.exit_code not in STOPPED_EXITS:
            return Verdict(
                pod,
                f"pod {pod} failed with exit code {failure.exit_code}",
                failure.attempt,
                failure.exit_code,
            )
        if failure.attempt in oom_attempts:
            previous = by_attempt.get(failure.attempt - 1)
            if previous is not None and previous.exit_code == EXIT_POOL_BROKEN:
                return Verdict(
                    pod,
                    f"pod {pod} was killed for memory again at the retry memory of "
                    f"{retry_memory_gb:g} GiB",
                    failure.attempt,
                    failure.exit_code,
                    memory=True,
                    limit_gb=retry_memory_gb,
                )
    return None


def failure_cause(verdict: Verdict, *, error: str | None, unit: str | None, task_dir: str) -> str:
    """What a failed attempt died of, for its message: the store refusing writes (exit 5), or
    the error its report gives (a unit's exception, last line); empty when nothing says."""
    if verdict.memory:
        return ""  # `memory_cause`, from the attempt's report
    if verdict.exit_code == EXIT_STORE:
        return f"the store is not writable: {task_dir}"
    if not error:
        return ""
    last = error.strip().splitlines()[-1] if error.strip() else error
    return f"unit {unit} raised {last}" if unit else last


def oom_attempts(
    failures: Sequence[AttemptFailure], reported_kills: Mapping[int, int]
) -> frozenset[int]:
    """The attempts of one pod killed for memory (C8), from failures and reports' kill counts."""
    return frozenset(f.attempt for f in failures if is_oom(f, reported_kills.get(f.attempt, 0)))


def split_task_state(
    task_id: str,
    pods: Mapping[str, PodStatus],
    *,
    coordinator_merges: bool,
    marker: bool,
    marker_wait_over: bool,
) -> str:
    """C1, C2, C3, C18: a split task's state from its pods' phases and the merge marker."""
    w0 = pods.get(worker_pod(task_id, 0))
    merge = pods.get(merge_pod(task_id))
    w0_phase = w0.phase if w0 else PodPhase.WAITING
    if w0_phase == PodPhase.FAILED:
        return FAILED
    if coordinator_merges:
        if w0_phase == PodPhase.SUCCEEDED:
            if marker:
                return DONE
            return FAILED if marker_wait_over else RUNNING
    else:
        if merge is not None and merge.phase == PodPhase.SUCCEEDED:
            return DONE
        if merge is not None and merge.phase == PodPhase.FAILED:
            return FAILED
        if w0_phase == PodPhase.SUCCEEDED:
            if merge is not None and merge.phase == PodPhase.SKIPPED:
                return SKIPPED
            return _live_state([merge] if merge else [], coordinator_done=True)
    if w0_phase == PodPhase.SKIPPED:
        return SKIPPED
    mine = [p for name, p in pods.items() if worker_index(task_id, name) is not None]
    return _live_state(mine, coordinator_done=False)


def unsplit_task_state(pod: PodStatus | None) -> str:
    """C4: an unsplit task's state is its single pod's."""
    if pod is None:
        return WAITING
    return {
        PodPhase.SUCCEEDED: DONE,
        PodPhase.FAILED: FAILED,
        PodPhase.SKIPPED: SKIPPED,
    }.get(pod.phase) or _live_state([pod], coordinator_done=False)


def _live_state(pods: Sequence[PodStatus], *, coordinator_done: bool) -> str:
    """C18: running > preempted > retrying > queued > waiting, over the pods not ended."""
    phases = {p.phase for p in pods}
    if coordinator_done or PodPhase.RUNNING in phases:
        return RUNNING
    if PodPhase.PREEMPTED in phases:
        return PREEMPTED
    if PodPhase.RETRYING in phases:
        return RETRYING
    if PodPhase.QUEUED in phases:
        return QUEUED
    return WAITING


def run_outcome(task_states: Mapping[str, str]) -> RunState | None:
    """C5: failed when a task failed, succeeded when every task is over, else None."""
    states = set(task_states.values())
    if FAILED in states:
        return RunState.FAILED
    if states and states <= {DONE, SKIPPED}:
        return RunState.SUCCEEDED
    return None


def live_run_state(task_states: Mapping[str, str]) -> RunState:
    """The state of a run still going: running once any task runs or has run, else queued."""
    states = set(task_states.values())
    if states & {RUNNING, PREEMPTED, RETRYING, DONE}:
        return RunState.RUNNING
    return RunState.QUEUED


def live_message(current: str, status: BackendStatus | None) -> dict[str, str]:
    """The message of a run still going, as a change of its record: why the backend cannot
    read its pods now (`BackendStatus.unreadable`: the run keeps its state meanwhile), else
    none; {} when the record already says it."""
    wanted = status.unreadable if status is not None else ""
    return {} if current == wanted else {"message": wanted}


def resolve_gone(
    stored: Mapping[str, str],
    *,
    markers: Mapping[str, bool],
    awaiting_marker: Mapping[str, bool],
) -> dict[str, str]:
    """C10: a workflow gone before its end was seen: final states stay, a split task with its
    marker is done, one still awaiting its marker stays running; only the rest fail."""
    resolved: dict[str, str] = {}
    for task_id, state in stored.items():
        if state in FINAL:
            resolved[task_id] = state
        elif markers.get(task_id):
            resolved[task_id] = DONE
        elif awaiting_marker.get(task_id):
            resolved[task_id] = RUNNING
        else:
            resolved[task_id] = FAILED
    return resolved


def marker_wait_over(merge_since: str | None, *, now: datetime, grace: timedelta) -> bool:
    """C2: whether a task awaiting its merge marker since `merge_since` (ISO time, None: not
    awaiting) waited longer than the grace."""
    return bool(merge_since and now - datetime.fromisoformat(merge_since) > grace)


def awaited_when_gone(
    merge_pending: Mapping[str, str], *, now: datetime, grace: timedelta
) -> dict[str, bool]:
    """C10: of the tasks a gone workflow's record says await their merge marker (by task, since
    when), whether each still may: True within the grace, False once it is over."""
    return {
        task_id: not marker_wait_over(since, now=now, grace=grace)
        for task_id, since in merge_pending.items()
    }


def watches_store_or_clock(
    *,
    merge_pending: Mapping[str, str],
    failures: Mapping[str, Sequence[AttemptFailure]],
    oom_kills: Mapping[str, Sequence[int]],
) -> bool:
    """Whether a run's record may have to change while its backend status stays the same, so
    a tick must derive it even then:

    - a task awaits its merge marker (C6): the marker may appear in the store, or the grace
      runs out;
    - an attempt exited 137 without the backend's evidence of a kill for memory and is not
      counted as one (C8): its report's count of kills may still appear in the store.
    """
    if merge_pending:
        return True
    for pod, found in failures.items():
        counted = set(oom_kills.get(pod, ()))
        for failure in found:
            unexplained = failure.exit_code == EXIT_POOL_BROKEN and not failure.oom_killed
            if unexplained and failure.attempt not in counted:
                return True
    return False


# The derivation of a run, in steps that take the facts gathered before them (reconcile.py).


@dataclass(frozen=True)
class TaskRecord:
    """What the derivation needs of a task's record: its state, its pods and the retry
    memory of each base pod (from its plan)."""

    task_id: str
    state: str
    splittable: bool
    pods: int = 1
    coordinator_merges: bool = False
    retry_memory_gb: Mapping[str, float] = field(default_factory=dict)

    @property
    def pod_names(self) -> list[str]:
        return task_pods(
            self.task_id,
            splittable=self.splittable,
            pods=self.pods,
            coordinator_merges=self.coordinator_merges,
        )

    @property
    def base_pods(self) -> list[str]:
        return base_pods(
            self.task_id, splittable=self.splittable, coordinator_merges=self.coordinator_merges
        )


def wants_marker(task: TaskRecord, status: BackendStatus | None) -> bool:
    """Whether the task's state depends on its merge marker now (C6, C10): a split task whose
    coordinator merges and succeeded, or, its workflow gone, a split task not final."""
    if not task.splittable:
        return False
    if status is None:
        return task.state not in FINAL
    w0 = status.pods.get(worker_pod(task.task_id, 0))
    return task.coordinator_merges and w0 is not None and w0.phase == PodPhase.SUCCEEDED


def wants_reported_kills(task: TaskRecord, status: BackendStatus | None) -> bool:
    """Whether the reports' counts of kills matter (C8): an attempt of one of its pods exited
    137 without the backend's evidence of a kill for memory."""
    if status is None:
        return False
    return any(
        f.exit_code == EXIT_POOL_BROKEN and not f.oom_killed
        for pod in task.pod_names
        for f in status.failures.get(pod, ())
    )


@dataclass(frozen=True)
class TaskDerived:
    """A task's state from its status and store facts, with what the record keeps of it:
    its pods' attempts killed for memory, since when it awaits its marker (ISO time), and
    why it failed (`MARKER_LOST` or the verdicts, in order)."""

    state: str
    oom_kills: Mapping[str, list[int]]
    merge_since: str | None
    awaiting: bool
    reasons: tuple[Verdict | str, ...] = ()


MARKER_LOST = "the coordinator ended but no merge marker appeared"


def derive_task(
    task: TaskRecord,
    status: BackendStatus,
    *,
    marker: bool,
    reported_kills: Mapping[str, Mapping[int, int]],
    oom_kills: Mapping[str, Sequence[int]],
    merge_since: str | None,
    now: datetime,
    grace: timedelta,
) -> TaskDerived:
    """C1-C4, C6-C8, C18: one task's state from its pods' status, its merge marker and the
    kills its reports counted; the kills counted so far and `merge_since` are the record's."""
    names = task.pod_names
    kills = {}
    for name in names:
        found = oom_attempts(status.failures.get(name, []), reported_kills.get(name, {}))
        if found:
            kills[name] = sorted(set(oom_kills.get(name, [])) | found)
    pods = {n: p for n, p in status.pods.items() if n in names}
    reasons: list[Verdict | str] = []
    awaiting = False
    if task.splittable:
        w0 = pods.get(worker_pod(task.task_id, 0))
        succeeded = w0 is not None and w0.phase == PodPhase.SUCCEEDED
        waiting_marker = task.coordinator_merges and succeeded and not marker
        if waiting_marker and merge_since is None:
            merge_since = now.isoformat()
        over = marker_wait_over(merge_since, now=now, grace=grace)
        awaiting = waiting_marker and not over
        state = split_task_state(
            task.task_id,
            pods,
            coordinator_merges=task.coordinator_merges,
            marker=marker,
            marker_wait_over=over,
        )
        if state == FAILED and over and waiting_marker:
            reasons.append(MARKER_LOST)
    else:
        state = unsplit_task_state(pods.get(task.task_id))
    for name in task.base_pods:
        verdict = fatal_failure(
            name,
            status.failures.get(name, []),
            oom_attempts=frozenset(kills.get(name, oom_kills.get(name, []))),
            retry_memory_gb=task.retry_memory_gb.get(name, 0.0),
        )
        if verdict and state != DONE:
            state = FAILED
            reasons.append(verdict)
    return TaskDerived(state, kills, merge_since, awaiting, tuple(reasons))

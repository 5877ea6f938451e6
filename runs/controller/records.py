"""The rules that turn the tasks' derived states into the run's record (docs/architecture.md): the
messages of failed tasks, the states once the workflow ended or went away, a task's fields
for its new state; plain functions of plain values, like `rules.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from runs.controller.rules import (
    CANCELLED,
    DONE,
    FAILED,
    FINAL,
    MARKER_LOST,
    QUEUED,
    WAITING,
    TaskDerived,
    resolve_gone,
)
from runs.ports import BackendStatus, WorkflowPhase


def task_reasons(
    task_id: str,
    derived: TaskDerived,
    *,
    causes: Mapping[str, str],
    status: BackendStatus,
) -> list[str]:
    """What is said of a task: each reason it failed (a verdict with the cause its report
    gives, by pod), or the last failure of its pods when nothing else says."""
    said = []
    for reason in derived.reasons:
        if isinstance(reason, str):
            said.append(reason)
        else:
            cause = causes.get(reason.pod, "")
            said.append(f"{reason.message}: {cause}" if cause else reason.message)
    if derived.state == FAILED and not said:
        said.append(failure_text(task_id, status))
    return said


def run_message(said: Sequence[tuple[str, str]]) -> str:
    """The run's message: what was said of each task (task, reason), in order."""
    return "; ".join(f"task '{task_id}': {reason}" for task_id, reason in said)


def failure_text(task_id: str, status: BackendStatus) -> str:
    """The last failure of the first of a task's pods that failed, for its message."""
    for name, failures in sorted(status.failures.items()):
        if name == task_id or name.startswith(f"{task_id}-"):
            last = failures[-1]
            code = "no exit code" if last.exit_code is None else f"exit code {last.exit_code}"
            return f"pod {name} failed ({code}){': ' + last.message if last.message else ''}"
    return "failed"


GONE_UNSEEN = "its workflow is gone and its end was not seen"


def workflow_end(
    states: Mapping[str, str],
    *,
    stored: Mapping[str, str],
    status: BackendStatus | None,
    markers: Mapping[str, bool],
    awaiting: Mapping[str, bool],
) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """C6, C10: the tasks' states once the workflow is gone (from the stored ones) or ended
    (what is still open fails, but a task awaiting its marker), with what is said of each
    task failed so (task, reason); the states as they are while the workflow goes on. Once
    the workflow is gone, `awaiting` holds the tasks that awaited their marker
    (`rules.awaited_when_gone`): True while they still may, False once their wait is over."""
    if status is None:
        still = {t: True for t, may in awaiting.items() if may}
        resolved = resolve_gone(stored, markers=markers, awaiting_marker=still)
        said = [
            (t, MARKER_LOST if t in awaiting else GONE_UNSEEN)
            for t, s in resolved.items()
            if s == FAILED and stored[t] != FAILED
        ]
        return resolved, said
    if status.phase not in (WorkflowPhase.SUCCEEDED, WorkflowPhase.FAILED, WorkflowPhase.STOPPED):
        return dict(states), []
    ended, said = dict(states), []
    for task_id, state in states.items():
        if state not in FINAL and not awaiting.get(task_id):
            ended[task_id] = FAILED
            said.append((task_id, "the workflow ended before the task did"))
    return ended, said


def ends_task_with_reports(old: str, new: str) -> bool:
    """Whether a task's change takes its times from its pods' reports (it ends done or failed)."""
    return new != old and new in (DONE, FAILED)


def task_change(
    *,
    state: str,
    started_at: datetime | None,
    new: str,
    now: datetime,
    why: str | None,
    reported: tuple[datetime | None, datetime | None] = (None, None),
) -> dict[str, object] | None:
    """The fields of a task to write for its new state; None if its state did not change.

    A task that ends done or failed takes its times from its pods' reports (`reported`: the
    first start, the last end), so a run whose controller was away while its pods ran records
    when the work happened rather than when the controller next looked."""
    if new == state:
        return None
    change: dict[str, object] = {"state": new}
    if new not in (WAITING, QUEUED) and started_at is None:
        change["started_at"] = now
    ended: datetime = now
    if new in FINAL:
        change["ended_at"] = now
    if new in (DONE, FAILED):
        began, last = reported
        start = change.get("started_at", started_at or now)
        if began is not None and isinstance(start, datetime) and began < start:
            change["started_at"] = began
        if last is not None and last < ended:
            change["ended_at"] = last
    if new == CANCELLED:
        change["message"] = "stopped: the run failed"
    if new == FAILED and why is not None:
        change["message"] = why
    return change

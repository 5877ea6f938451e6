"""What a reconcile reads of its pods' reports in the store: the kills for memory they count
(C8), why an attempt failed, and when the work began and ended. Gaps found by mutation
testing (docs/testing.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runs.controller.reconcile import reconcile_with
from runs.models import Run, Task
from runs.plans import PodShape
from runs.ports import AttemptFailure, PodPhase, WorkflowPhase
from runs.store import task_paths
from simrun_harness.report import ReportError, WorkerReport, write_report
from tests import builders
from tests.runs.controller.test_reconcile_writes import fresh, run_of, status, task

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("store")]

P = PodPhase
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def reported(
    run: Run,
    task_id: str,
    attempt: int = 0,
    *,
    exit_code: int = 0,
    oom_kills: int = 0,
    error: ReportError | None = None,
    started_at: datetime = NOW,
    ended_at: datetime = NOW,
) -> None:
    """The report of an unsplit task's pod (named as the task) for one attempt."""
    report = WorkerReport(
        task=task_id,
        worker=task_id,
        role="exec",
        attempt=attempt,
        node="n1",
        processes=1,
        oom_kills=oom_kills,
        exit_code=exit_code,
        started_at=started_at,
        ended_at=ended_at,
        error=error,
    )
    write_report(task_paths(run.pk, task_id).report(task_id, attempt), report)


def test_a_kill_for_memory_counted_by_a_report_is_kept_and_a_second_fails_the_task() -> None:
    """C7, C8: exit 137 without the backend's evidence, but the attempt's report counted a
    kill for memory: the run keeps it; the next attempt (at the retry memory) killed so too
    fails the task."""
    plan = builders.plan(1, PodShape(cores=1, memory_gb=2, retry_memory_gb=8))
    run = run_of(("t", False, plan))
    reported(run, "t", 0, exit_code=137, oom_kills=1)
    once = [AttemptFailure(0, 137)]

    reconcile_with(fresh(run), status(failures={"t": once}, t=P.RETRYING), now=NOW)

    assert Run.objects.get(pk=run.pk).oom_kills == {"t": [0]}
    assert task(run, "t").state == "retrying"
    reported(run, "t", 1, exit_code=137, oom_kills=1)
    twice = [*once, AttemptFailure(1, 137)]
    reconcile_with(fresh(run), status(failures={"t": twice}, t=P.RETRYING), now=NOW)
    assert Run.objects.get(pk=run.pk).oom_kills == {"t": [0, 1]}
    failed = task(run, "t")
    assert failed.state == "failed"
    assert failed.message == "pod t was killed for memory again at the retry memory of 8 GiB"


def test_a_failed_attempt_is_named_with_the_error_its_report_gives() -> None:
    """The run's message says which unit raised what (the last line of its error), read from
    the report of the attempt that failed the task."""
    run = run_of(("t", False, None))
    trace = "Traceback (most recent call last):\n  ...\nValueError: boom"
    reported(run, "t", 1, exit_code=2, error=ReportError(unit="u7", message=trace))
    failures = {"t": [AttemptFailure(0, None), AttemptFailure(1, 2)]}

    reconcile_with(fresh(run), status(failures=failures, t=P.FAILED), now=NOW)

    assert Run.objects.get(pk=run.pk).message == (
        "task 't': pod t failed with exit code 2: unit u7 raised ValueError: boom"
    )


def test_a_task_that_ends_and_its_run_take_their_times_from_the_reports() -> None:
    """The controller saw the run running a while after its pod began, and its end a while
    after it ended: the task and the run record when the work happened."""
    run = run_of(("t", False, None), started_at=NOW - MINUTE)
    Task.objects.filter(run=run).update(state="running", started_at=NOW - MINUTE)
    began, ended = NOW - 3 * MINUTE, NOW - 2 * MINUTE
    reported(run, "t", started_at=began, ended_at=ended)
    done = status(WorkflowPhase.SUCCEEDED, t=P.SUCCEEDED)

    reconcile_with(fresh(run), done, now=NOW)

    t = task(run, "t")
    assert (t.state, t.started_at, t.ended_at) == ("done", began, ended)
    stored = Run.objects.get(pk=run.pk)
    assert (stored.state, stored.started_at, stored.ended_at) == ("succeeded", began, ended)


def test_an_ended_run_spans_its_tasks_first_start_and_last_end_whenever_recorded() -> None:
    """A task that ended at an earlier poll counts with the times it recorded then: here it
    began first and ended last, though another task ends at this poll."""
    run = run_of(("a", False, None), ("b", False, None), started_at=NOW - 5 * MINUTE)
    first, last = NOW - 9 * MINUTE, NOW - MINUTE
    Task.objects.filter(run=run, task_id="a").update(state="done", started_at=first, ended_at=last)
    Task.objects.filter(run=run, task_id="b").update(state="running", started_at=NOW - 5 * MINUTE)
    reported(run, "b", started_at=NOW - 8 * MINUTE, ended_at=NOW - 2 * MINUTE)
    done = status(WorkflowPhase.SUCCEEDED, a=P.SUCCEEDED, b=P.SUCCEEDED)

    reconcile_with(fresh(run), done, now=NOW)

    stored = Run.objects.get(pk=run.pk)
    assert (stored.state, stored.started_at, stored.ended_at) == ("succeeded", first, last)

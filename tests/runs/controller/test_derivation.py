"""The steps of a run's derivation (`rules.derive_task`, `records.py`) with plain values:
which store facts a status needs, a task's state and what its record keeps, the workflow's
end, the messages and a task's fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from runs.controller import records, rules
from runs.controller.rules import TaskRecord
from runs.ports import AttemptFailure, BackendStatus, PodPhase, PodStatus, WorkflowPhase

P = PodPhase
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
GRACE = timedelta(seconds=30)
SCAN = TaskRecord("scan", "running", True, pods=2, coordinator_merges=True)
MERGED = TaskRecord("scan", "running", True, pods=2)  # a merge pod of its own
UNSPLIT = TaskRecord("t", "running", False, retry_memory_gb={"t": 8.0})


def status(
    phase: WorkflowPhase = WorkflowPhase.RUNNING,
    failures: dict[str, list[AttemptFailure]] | None = None,
    **phases: PodPhase,
) -> BackendStatus:
    pods = {n.replace("_", "-"): PodStatus(n.replace("_", "-"), p) for n, p in phases.items()}
    return BackendStatus(phase, pods, failures or {})


def derive(task: TaskRecord, of: BackendStatus, **facts: object) -> rules.TaskDerived:
    values: dict[str, object] = {
        "marker": False,
        "reported_kills": {},
        "oom_kills": {},
        "merge_since": None,
        "now": NOW,
        "grace": GRACE,
    }
    return rules.derive_task(task, of, **(values | facts))  # type: ignore[arg-type]


def test_the_marker_is_wanted_once_a_merging_coordinator_succeeded_or_its_workflow_is_gone() -> (
    None
):
    """C6, C10, C20: the store is listed only when the task's state depends on the marker."""
    assert not rules.wants_marker(SCAN, status(scan_w0=P.RUNNING, scan_w1=P.RUNNING))
    assert rules.wants_marker(SCAN, status(scan_w0=P.SUCCEEDED))
    assert not rules.wants_marker(MERGED, status(scan_w0=P.SUCCEEDED))
    assert not rules.wants_marker(UNSPLIT, None)
    assert rules.wants_marker(SCAN, None)
    assert not rules.wants_marker(TaskRecord("scan", "done", True), None)


def test_reported_kills_are_wanted_only_for_an_exit_137_the_backend_does_not_explain() -> None:
    """C8: the reports' counts matter only for an attempt that exited 137 without OOMKilled."""
    killed = {"scan-w1": [AttemptFailure(0, 137, oom_killed=True)]}
    assert not rules.wants_reported_kills(SCAN, status(failures=killed))
    assert not rules.wants_reported_kills(
        SCAN, status(failures={"scan-w1": [AttemptFailure(0, 2)]})
    )
    assert rules.wants_reported_kills(SCAN, status(failures={"scan-w1": [AttemptFailure(0, 137)]}))
    assert not rules.wants_reported_kills(
        SCAN, status(failures={"other-w0": [AttemptFailure(0, 137)]})
    )
    assert not rules.wants_reported_kills(SCAN, None)


def test_a_merging_coordinator_without_its_marker_awaits_it_then_fails() -> None:
    """C6: the wait starts when first seen, keeps the task running, and fails it after the
    grace with the reason named."""
    ended = status(scan_w0=P.SUCCEEDED, scan_w1=P.SUCCEEDED)
    first = derive(SCAN, ended)
    assert (first.state, first.merge_since, first.awaiting) == ("running", NOW.isoformat(), True)
    later = (NOW - GRACE - timedelta(seconds=1)).isoformat()
    over = derive(SCAN, ended, merge_since=later)
    assert (over.state, over.awaiting, over.reasons) == ("failed", False, (rules.MARKER_LOST,))
    assert derive(SCAN, ended, marker=True, merge_since=later).state == "done"


def test_kills_counted_in_reports_are_kept_and_a_second_one_at_the_retry_memory_fails() -> None:
    """C7, C8: a 137 counted as a kill by its report joins the record's kills; the kill of the
    attempt after a kill for memory fails the task with the retry memory named."""
    failures = {"t": [AttemptFailure(0, 137), AttemptFailure(1, 137)]}
    once = derive(UNSPLIT, status(failures=failures, t=P.RETRYING), reported_kills={"t": {0: 1}})
    assert (once.state, once.oom_kills) == ("retrying", {"t": [0]})
    twice = derive(
        UNSPLIT,
        status(failures=failures, t=P.RETRYING),
        reported_kills={"t": {1: 1}},
        oom_kills={"t": [0]},
    )
    assert twice.state == "failed" and twice.oom_kills == {"t": [0, 1]}
    [verdict] = twice.reasons
    assert isinstance(verdict, rules.Verdict) and "8 GiB" in verdict.message


def test_messages_name_the_verdict_with_its_cause_or_the_last_failure() -> None:
    failures = {"t": [AttemptFailure(0, 2, message="boom")]}
    failed = derive(UNSPLIT, status(failures=failures, t=P.FAILED))
    of = status(failures=failures, t=P.FAILED)
    assert records.task_reasons("t", failed, causes={"t": "unit 3 raised X"}, status=of) == [
        "pod t failed with exit code 2: unit 3 raised X"
    ]
    assert records.task_reasons("t", failed, causes={}, status=of) == [
        "pod t failed with exit code 2"
    ]
    plain = rules.TaskDerived("failed", {}, None, False)
    assert records.task_reasons("t", plain, causes={}, status=of) == [
        "pod t failed (exit code 2): boom"
    ]


def test_the_runs_message_says_each_reason_with_its_task_in_order() -> None:
    said = [("a", "pod a failed"), ("b", "the workflow ended before the task did")]

    assert records.run_message(said) == (
        "task 'a': pod a failed; task 'b': the workflow ended before the task did"
    )
    assert records.run_message([]) == ""


def test_a_workflow_that_ended_fails_what_is_open_but_a_task_awaiting_its_marker() -> None:
    """C6: only a task awaiting its marker keeps the run open after the workflow ended."""
    states = {"a": "done", "b": "running", "scan": "running"}
    ended = status(WorkflowPhase.FAILED)
    found, said = records.workflow_end(
        states, stored=states, status=ended, markers={}, awaiting={"scan": True}
    )
    assert found == {"a": "done", "b": "failed", "scan": "running"}
    assert said == [("b", "the workflow ended before the task did")]
    going = records.workflow_end(states, stored=states, status=status(), markers={}, awaiting={})
    assert going == (states, [])


def test_a_gone_workflow_resolves_from_the_stored_states_and_the_markers() -> None:
    """C10: final states stay, a split task with its marker is done, the rest fail."""
    stored = {"a": "done", "scan": "running", "t": "running"}
    found, said = records.workflow_end(
        {}, stored=stored, status=None, markers={"scan": True}, awaiting={}
    )
    assert found == {"a": "done", "scan": "done", "t": "failed"}
    assert said == [("t", "its workflow is gone and its end was not seen")]


def test_a_gone_workflows_task_awaiting_its_marker_stays_open_then_fails_naming_it() -> None:
    """C10: a task that awaited its marker when the workflow went stays running within the
    grace; once the grace is over it fails, and the message says the marker never came."""
    stored = {"scan": "running", "t": "running"}
    since = {"scan": NOW.isoformat()}
    within = rules.awaited_when_gone(since, now=NOW + GRACE, grace=GRACE)
    over = rules.awaited_when_gone(since, now=NOW + GRACE + timedelta(seconds=1), grace=GRACE)
    assert (within, over) == ({"scan": True}, {"scan": False})

    kept, _ = records.workflow_end({}, stored=stored, status=None, markers={}, awaiting=within)
    lost, said = records.workflow_end({}, stored=stored, status=None, markers={}, awaiting=over)

    assert kept == {"scan": "running", "t": "failed"}
    assert lost == {"scan": "failed", "t": "failed"}
    assert said == [
        ("scan", "the coordinator ended but no merge marker appeared"),
        ("t", "its workflow is gone and its end was not seen"),
    ]


def test_a_task_that_ends_takes_its_times_from_its_reports() -> None:
    began, last = NOW - timedelta(hours=1), NOW - timedelta(minutes=5)
    change = records.task_change(
        state="running", started_at=NOW, new="done", now=NOW, why=None, reported=(began, last)
    )
    assert change == {"state": "done", "ended_at": last, "started_at": began}
    assert (
        records.task_change(state="running", started_at=NOW, new="running", now=NOW, why=None)
        is None
    )
    failed = records.task_change(state="queued", started_at=None, new="failed", now=NOW, why="x")
    assert failed == {"state": "failed", "started_at": NOW, "ended_at": NOW, "message": "x"}
    assert records.ends_task_with_reports("running", "done")
    assert not records.ends_task_with_reports("done", "done")
    assert not records.ends_task_with_reports("running", "cancelled")


# --- gaps found by mutation testing (docs/testing.md) ---------------------------------------


def test_an_unsplit_task_never_awaits_a_merge_marker() -> None:
    """C6: only a split task whose coordinator merges waits for a marker; an unsplit task
    still open when its workflow ended fails like any other."""
    assert derive(UNSPLIT, status(t=P.RUNNING)).awaiting is False


def test_the_marker_is_awaited_for_the_whole_grace_with_no_reason_to_fail_yet() -> None:
    """C6: K12: at exactly the grace the task still runs, awaiting its marker, and nothing
    says it failed; only past the grace does it fail."""
    ended = status(scan_w0=P.SUCCEEDED, scan_w1=P.SUCCEEDED)
    at_grace = derive(SCAN, ended, merge_since=(NOW - GRACE).isoformat())
    assert (at_grace.state, at_grace.awaiting, at_grace.reasons) == ("running", True, ())
    past = derive(SCAN, ended, merge_since=(NOW - GRACE - timedelta(microseconds=1)).isoformat())
    assert (past.state, past.awaiting) == ("failed", False)


def test_kills_the_record_counted_still_count_when_no_report_says_so_now() -> None:
    """C7, C8: attempts counted as killed for memory at earlier polls (from reports that
    cannot be read now) still make the second kill fail the task."""
    failures = {"t": [AttemptFailure(0, 137), AttemptFailure(1, 137)]}
    found = derive(UNSPLIT, status(failures=failures, t=P.RETRYING), oom_kills={"t": [0, 1]})
    assert found.state == "failed"


def test_a_failure_without_a_verdict_names_the_first_failed_pod_of_the_task_and_its_end() -> None:
    """A task failed with no verdict of its own (the backend gave up retrying): its message
    names its first failed pod (other tasks' pods skipped) and that pod's last attempt, its
    exit code or that it had none, and the attempt's message when there is one."""
    failures = {
        "other-w0": [AttemptFailure(0, 3)],
        "scan-w1": [AttemptFailure(0, 137, message="evicted"), AttemptFailure(1, None)],
    }
    assert records.failure_text("scan", status(failures=failures)) == (
        "pod scan-w1 failed (no exit code)"
    )
    evicted = {"t": [AttemptFailure(0, 137, message="evicted")]}
    assert records.failure_text("t", status(failures=evicted)) == (
        "pod t failed (exit code 137): evicted"
    )
    assert records.failure_text("t", status()) == "failed"


def test_a_report_that_began_after_the_recorded_start_leaves_that_start() -> None:
    """A task takes the first start among its reports only when it is earlier than the
    start it has (a report of a first attempt lost leaves the start the poll saw)."""
    seen, began, last = NOW - timedelta(hours=1), NOW - timedelta(minutes=30), NOW
    change = records.task_change(
        state="running", started_at=seen, new="done", now=NOW, why=None, reported=(began, last)
    )
    assert change == {"state": "done", "ended_at": NOW}

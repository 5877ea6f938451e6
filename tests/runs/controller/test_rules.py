"""The controller's rules as plain functions of plain values (docs/architecture.md)."""

from __future__ import annotations

from runs.controller import rules
from runs.controller.advice import memory_cause
from runs.plans import task_pods
from runs.ports import AttemptFailure, BackendStatus, PodPhase, PodStatus, WorkflowPhase

P = PodPhase


def pods(**phases: PodPhase) -> dict[str, PodStatus]:
    return {
        name.replace("_", "-"): PodStatus(name.replace("_", "-"), p) for name, p in phases.items()
    }


def split(
    phases: dict[str, PodStatus], *, merges: bool = False, marker: bool = False, over: bool = False
) -> str:
    return rules.split_task_state(
        "scan", phases, coordinator_merges=merges, marker=marker, marker_wait_over=over
    )


def test_a_split_task_is_done_when_its_merge_succeeded() -> None:
    """C1: a split task is done when its merge node succeeded."""
    assert split(pods(scan_w0=P.SUCCEEDED, scan_w1=P.QUEUED, scan_merge=P.SUCCEEDED)) == "done"


def test_a_split_task_runs_while_its_merge_is_awaited() -> None:
    """C18: running when the coordinator is done and the merge is awaited."""
    assert split(pods(scan_w0=P.SUCCEEDED, scan_merge=P.QUEUED)) == "running"


def test_a_coordinator_that_merges_needs_the_marker() -> None:
    """C2: done with the marker; running without it until the wait is over; then failed."""
    phases = pods(scan_w0=P.SUCCEEDED)
    assert split(phases, merges=True, marker=True) == "done"
    assert split(phases, merges=True, marker=False) == "running"
    assert split(phases, merges=True, marker=False, over=True) == "failed"


def test_a_failed_coordinator_or_merge_fails_the_task() -> None:
    """C3: a split task fails when its coordinator or its merge failed."""
    assert split(pods(scan_w0=P.FAILED, scan_w1=P.RUNNING)) == "failed"
    assert split(pods(scan_w0=P.SUCCEEDED, scan_merge=P.FAILED)) == "failed"


def test_a_failed_extra_worker_never_fails_the_task() -> None:
    """C3: an extra worker never fails a task."""
    assert split(pods(scan_w0=P.RUNNING, scan_w1=P.FAILED)) == "running"
    assert split(pods(scan_w0=P.SUCCEEDED, scan_w1=P.FAILED, scan_merge=P.SUCCEEDED)) == "done"


def test_an_unsplit_task_is_its_pod() -> None:
    """C4: an unsplit task's state is its single node's."""
    assert rules.unsplit_task_state(PodStatus("t", P.SUCCEEDED)) == "done"
    assert rules.unsplit_task_state(PodStatus("t", P.FAILED)) == "failed"
    assert rules.unsplit_task_state(PodStatus("t", P.RUNNING)) == "running"
    assert rules.unsplit_task_state(None) == "waiting"


def test_task_states_order_running_preempted_retrying_queued_waiting() -> None:
    """C18: the live states of a task from its pods."""
    assert split(pods(scan_w0=P.PREEMPTED, scan_w1=P.RUNNING)) == "running"
    assert split(pods(scan_w0=P.PREEMPTED, scan_w1=P.RETRYING)) == "preempted"
    assert split(pods(scan_w0=P.RETRYING, scan_w1=P.QUEUED)) == "retrying"
    assert split(pods(scan_w0=P.QUEUED)) == "queued"
    assert split({}) == "waiting"


def test_the_run_fails_with_a_task_and_succeeds_when_every_task_is_done() -> None:
    """C5: every task done → succeeded; a task failed → failed."""
    assert rules.run_outcome({"a": "done", "b": "done"}) == "succeeded"
    assert rules.run_outcome({"a": "done", "b": "failed"}) == "failed"
    assert rules.run_outcome({"a": "done", "b": "running"}) is None


def test_only_the_oom_killers_evidence_counts_as_a_kill_for_memory() -> None:
    """C8: OOMKilled or a report counting kills; a bare 137 is an eviction."""
    evicted = AttemptFailure(attempt=0, exit_code=137)
    killed = AttemptFailure(attempt=1, exit_code=137, oom_killed=True)
    assert rules.oom_attempts([evicted, killed], {}) == {1}
    assert rules.oom_attempts([evicted], {0: 1}) == {0}


def test_a_second_kill_at_the_retry_memory_fails_naming_it() -> None:
    """C7: after a kill for memory one retry with the retry memory; a second kill fails."""
    first = AttemptFailure(attempt=0, exit_code=137, oom_killed=True)
    second = AttemptFailure(attempt=1, exit_code=137, oom_killed=True)
    assert (
        rules.fatal_failure("scan-w0", [first], oom_attempts=frozenset({0}), retry_memory_gb=3)
        is None
    )
    verdict = rules.fatal_failure(
        "scan-w0", [first, second], oom_attempts=frozenset({0, 1}), retry_memory_gb=3.5
    )
    assert verdict is not None
    assert (
        verdict.message == "pod scan-w0 was killed for memory again at the retry memory of 3.5 GiB"
    )


def test_a_memory_failure_names_the_unit_its_peak_the_limit_and_a_setting_with_room() -> None:
    cause = memory_cause(
        unit="u000512", value=512, peak_gb=2.91, limit_gb=1.8125, per_worker_gb=0.5
    )
    assert cause == (
        "unit u000512 (value 512) had reached 2.91 GB in its process when killed with the "
        "pod's limit at 1.81 GB, 0.5 GB per worker; give its units more memory: in the "
        "workflow, the task's resources: {memory_per_worker_gb: 6}"
    )


def test_a_memory_failure_without_a_report_names_the_unit_held_and_the_setting() -> None:
    """The pod was killed at its limit before the harness wrote a report: the unit its
    claim names, the limit the pod had, and a setting with room."""
    cause = memory_cause(unit="u000003", value=None, peak_gb=None, limit_gb=1.5, per_worker_gb=None)
    assert cause == (
        "unit u000003 was running when the pod was killed with the pod's limit at 1.50 GB; "
        "give its units more memory: in the workflow, the task's resources: "
        "{memory_per_worker_gb: 3}"
    )


def test_a_kill_after_a_preemption_that_followed_a_kill_does_not_count() -> None:
    """K9: the attempt after a preemption had the first memory again; its kill is retried."""
    attempts = [
        AttemptFailure(attempt=0, exit_code=137, oom_killed=True),
        AttemptFailure(attempt=1, exit_code=None, message="pod deleted"),
        AttemptFailure(attempt=2, exit_code=137, oom_killed=True),
    ]
    verdict = rules.fatal_failure(
        "scan-w0", attempts, oom_attempts=frozenset({0, 2}), retry_memory_gb=3
    )
    assert verdict is None


def test_only_a_stopped_pod_is_retried() -> None:
    """K7: no exit code, 137 and 143 are retried; any other exit fails at once, naming it."""
    for code in (None, 137, 143):
        stopped = AttemptFailure(attempt=0, exit_code=code)
        assert (
            rules.fatal_failure("t", [stopped], oom_attempts=frozenset(), retry_memory_gb=1) is None
        )
    verdict = rules.fatal_failure(
        "t", [AttemptFailure(attempt=0, exit_code=3)], oom_attempts=frozenset(), retry_memory_gb=1
    )
    assert verdict is not None
    assert verdict.message == "pod t failed with exit code 3"


def test_a_gone_workflow_resolves_from_stored_states_and_markers() -> None:
    """C10: final states stay, a marker makes done, awaiting a marker stays open, others fail."""
    resolved = rules.resolve_gone(
        {"a": "done", "b": "running", "c": "running", "d": "queued"},
        markers={"b": True},
        awaiting_marker={"c": True},
    )
    assert resolved == {"a": "done", "b": "done", "c": "running", "d": "failed"}


def test_the_pods_of_a_task_and_its_base_pods() -> None:
    """M1: coordinator, extras and merge; only the coordinator and merge are base pods."""
    names = task_pods("scan", splittable=True, pods=3, coordinator_merges=False)
    assert names == ["scan-w0", "scan-w1", "scan-w2", "scan-merge"]
    assert rules.base_pods("scan", splittable=True, coordinator_merges=True) == ["scan-w0"]


def watches(
    merge_pending: dict[str, str] | None = None,
    failures: dict[str, list[AttemptFailure]] | None = None,
    oom_kills: dict[str, list[int]] | None = None,
) -> bool:
    return rules.watches_store_or_clock(
        merge_pending=merge_pending or {}, failures=failures or {}, oom_kills=oom_kills or {}
    )


def test_a_run_otherwise_depends_on_its_status_alone() -> None:
    """No marker awaited, no exit 137 without its evidence: the same status, the same record."""
    assert not watches()
    assert not watches(failures={"scan-w0": [AttemptFailure(0, 143), AttemptFailure(1, 3)]})


def test_a_run_awaiting_a_merge_marker_depends_on_the_store_and_the_clock() -> None:
    """C6: the marker may appear, the grace may run out, with the status as it is."""
    assert watches(merge_pending={"scan": "2024-01-01T00:00:00+00:00"})


def test_an_exit_137_not_yet_counted_as_a_kill_for_memory_depends_on_the_store() -> None:
    """C8: its report's count of kills may still appear; once counted, or with the backend's
    own evidence, it does not."""
    killed = {"grow-w0": [AttemptFailure(0, 137)]}
    assert watches(failures=killed)
    assert not watches(failures=killed, oom_kills={"grow-w0": [0]})
    assert not watches(failures={"grow-w0": [AttemptFailure(0, 137, oom_killed=True)]})


# --- gaps found by mutation testing (docs/testing.md) ---------------------------------------


def test_a_bare_exit_137_is_no_kill_for_memory() -> None:
    """C8: without a report's count, an exit 137 without OOMKilled is an eviction."""
    assert not rules.is_oom(AttemptFailure(attempt=0, exit_code=137))
    assert rules.is_oom(AttemptFailure(attempt=0, exit_code=137), 1)


def test_a_kill_in_the_attempt_after_an_eviction_at_exit_137_counts_at_the_retry_memory() -> None:
    """C7: M9: every attempt after an exit 137 runs with the retry memory, so its kill for
    memory fails the pod, and the verdict names the pod."""
    attempts = [
        AttemptFailure(attempt=0, exit_code=137),
        AttemptFailure(attempt=1, exit_code=137, oom_killed=True),
    ]
    verdict = rules.fatal_failure("w", attempts, oom_attempts=frozenset({1}), retry_memory_gb=2)
    assert verdict == rules.Verdict(
        "w",
        "pod w was killed for memory again at the retry memory of 2 GiB",
        1,
        137,
        memory=True,
        limit_gb=2,
    )
    exited = rules.fatal_failure(
        "w", [AttemptFailure(0, 3)], oom_attempts=frozenset(), retry_memory_gb=2
    )
    assert exited is not None and exited.pod == "w"


def test_a_merge_skipped_after_its_coordinator_succeeded_skips_the_task() -> None:
    """C18: the coordinator done and its merge skipped (the workflow stopped): skipped."""
    assert split(pods(scan_w0=P.SUCCEEDED, scan_merge=P.SKIPPED)) == "skipped"


def test_an_unsplit_pod_waiting_for_admission_is_queued() -> None:
    """C4: C18: an unsplit task's live state is its pod's: queued, preempted, retrying."""
    assert rules.unsplit_task_state(PodStatus("t", P.QUEUED)) == "queued"
    assert rules.unsplit_task_state(PodStatus("t", P.PREEMPTED)) == "preempted"
    assert rules.unsplit_task_state(PodStatus("t", P.SKIPPED)) == "skipped"


def test_a_run_of_done_and_skipped_tasks_succeeded() -> None:
    """C5: every task over (done or skipped) → succeeded; no task at all → not ended."""
    assert rules.run_outcome({"a": "done", "b": "skipped"}) == "succeeded"
    assert rules.run_outcome({}) is None


def test_a_live_run_is_running_once_a_task_runs_or_has_run_else_queued() -> None:
    """C18: a live run is queued until any task runs, is preempted, retries or is done."""
    assert rules.live_run_state({"a": "queued", "b": "waiting"}) == "queued"
    for state in ("running", "preempted", "retrying", "done"):
        assert rules.live_run_state({"a": state, "b": "waiting"}) == "running"


def test_a_merge_pod_is_a_base_pod_unless_the_coordinator_merges() -> None:
    """C3: a failed merge fails its task: it is a base pod when there is one."""
    assert rules.base_pods("scan", splittable=True, coordinator_merges=False) == [
        "scan-w0",
        "scan-merge",
    ]
    assert rules.base_pods("t", splittable=False, coordinator_merges=False) == ["t"]


def test_a_live_run_says_why_its_status_cannot_be_read_and_nothing_else() -> None:
    """B13: a status the backend cannot read (Argo offloaded its nodes) is the run's message, until
    a readable status clears it; {} when the record already says what it should."""
    unreadable = BackendStatus(WorkflowPhase.RUNNING, unreadable="Argo offloaded …")
    readable = BackendStatus(WorkflowPhase.RUNNING)
    assert rules.live_message("", unreadable) == {"message": "Argo offloaded …"}
    assert rules.live_message("Argo offloaded …", unreadable) == {}
    assert rules.live_message("Argo offloaded …", readable) == {"message": ""}
    assert rules.live_message("", readable) == {}
    assert rules.live_message("", None) == {}

"""The local backend's DAG rules with plain values (`cluster/local/dag.py`): the phase of each
pod of a run from its attempts, when a task is done, the workflow's phase, the status the
controller reads. No process runs: attempts are built as their files would read."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.local.attempts import Attempt, Eviction, ExitStatus
from cluster.local.dag import (
    OOM_MESSAGE,
    backend_status,
    failure_message,
    failures,
    fit_message,
    next_memory,
    next_processes,
    run_views,
    was_evicted,
    workflow_phase,
)
from runs.plans import Node, PodShape
from runs.ports import AttemptFailure, PodPhase, PodStatus, TaskLaunch, WorkflowPhase
from tests.builders import LOCAL
from tests.cluster.local.builders import command_task, launch, shape, split_task

P = PodPhase
NODE = Node("local", cores=4, memory_gb=8)
plan = LOCAL.plan


def ended(
    number: int = 0,
    code: int | None = 0,
    *,
    oom: bool = False,
    lost: bool = False,
    evicted: str | None = None,
    message: str = "",
) -> Attempt:
    """An attempt that ended with `code`."""
    eviction = Eviction(evicted, 0.5) if evicted else None
    exit_status = ExitStatus(code, oom, 1.0, lost=lost, message=message)
    return Attempt(number, Path("/nowhere"), 0.0, 1.0, 0.5, None, None, eviction, exit_status)


def running(number: int = 0) -> Attempt:
    return Attempt(number, Path("/nowhere"), 0.0, 1.0, 0.5, None, None, None, None)


SCAN_AFTER = launch(
    "r1",
    split_task("scan", 3),
    command_task("after", "pass", deps=["scan"]),
    command_task("last", "pass", deps=["after"]),
)


def phases(attempts: dict[str, list[Attempt]], *, halted: bool = False) -> dict[str, PodPhase]:
    return {v.spec.name: v.phase for v in run_views(SCAN_AFTER, attempts, halted=halted)}


def test_a_new_run_queues_its_first_tasks_pods_and_the_rest_wait() -> None:
    assert phases({}) == {
        "scan-w0": P.QUEUED,
        "scan-w1": P.QUEUED,
        "scan-w2": P.QUEUED,
        "scan-merge": P.WAITING,
        "after": P.WAITING,
        "last": P.WAITING,
    }


def test_the_merge_waits_for_the_coordinator_only_and_the_next_task_for_the_merge() -> None:
    """M11: the extras still run; the merge queues once the coordinator succeeded; the task
    after it once the merge succeeded."""
    found = phases({"scan-w0": [ended()], "scan-w1": [running()], "scan-w2": [running()]})
    assert (found["scan-merge"], found["after"]) == (P.QUEUED, P.WAITING)
    found = phases({"scan-w0": [ended()], "scan-w1": [running()], "scan-merge": [ended()]})
    assert (found["after"], found["last"]) == (P.QUEUED, P.WAITING)


def test_a_coordinator_that_merges_itself_makes_its_task_done() -> None:
    merging = launch("r1", split_task("scan", 2, coordinator_merges=True), command_task("t", "x"))
    views = run_views(merging, {"scan-w0": [ended()]}, halted=False)
    assert [v.spec.name for v in views] == ["scan-w0", "scan-w1", "t"]
    assert views[-1].phase is P.QUEUED  # `t` depends on nothing: queued from the start


def test_an_extra_workers_failure_fails_nothing_else() -> None:
    """C3: M2: the merge and the tasks after it go on as if the extra had not failed."""
    found = phases({"scan-w0": [running()], "scan-w1": [ended(code=1)]})
    assert found == {
        "scan-w0": P.RUNNING,
        "scan-w1": P.FAILED,
        "scan-w2": P.QUEUED,
        "scan-merge": P.WAITING,
        "after": P.WAITING,
        "last": P.WAITING,
    }
    done = phases(
        {"scan-w0": [ended()], "scan-w1": [ended(code=1)], "scan-merge": [ended()]},
    )
    assert done["after"] is P.QUEUED


def test_a_failed_coordinator_skips_its_merge_and_what_follows() -> None:
    found = phases({"scan-w0": [ended(code=3)], "scan-w1": [running()]})
    assert (found["scan-merge"], found["after"], found["last"]) == (P.SKIPPED,) * 3


def test_a_failed_base_pod_keeps_waiting_pods_of_other_branches_from_starting() -> None:
    """After a failure no pod that waits for its dependencies starts (Argo's fail-fast);
    pods already queued are left to start."""
    branches = launch(
        "r1",
        command_task("a", "x"),
        command_task("b", "x"),
        command_task("after_b", "x", deps=["b"]),
    )
    views = run_views(branches, {"a": [ended(code=1)], "b": [running()]}, halted=False)
    found = {v.spec.name: (v.phase, v.message) for v in views}
    assert found["after_b"] == (P.SKIPPED, "another task failed")
    views = run_views(branches, {"a": [ended(code=1)]}, halted=False)
    assert {v.spec.name: v.phase for v in views}["b"] is P.QUEUED


def test_a_skipped_pod_says_why() -> None:
    views = run_views(SCAN_AFTER, {"scan-w0": [ended(code=3)]}, halted=False)
    messages = {v.spec.name: v.message for v in views}
    assert messages["scan-merge"] == "a dependency failed"
    stopped = run_views(SCAN_AFTER, {}, halted=True)
    assert {v.message for v in stopped} == {"the workflow was stopped"}


@pytest.mark.parametrize(
    ("attempt", "message"),
    [
        (ended(code=137, oom=True), OOM_MESSAGE),
        (
            ended(code=None, lost=True, message="supervisor gone"),
            "pod deleted: supervisor gone (no exit code)",
        ),
        (ended(code=None, lost=True), "pod deleted: lost (no exit code)"),
        (
            ended(code=143, evicted="preempted by r2"),
            "pod deleted: preempted by r2 (exit code 143)",
        ),
        (ended(code=3), "main: Error (exit code 3)"),
    ],
)
def test_a_failed_attempt_is_worded_as_argo_words_its_node(attempt: Attempt, message: str) -> None:
    assert failure_message(attempt) == message


def test_the_failed_attempts_of_a_pod_are_listed_oldest_first_without_successes() -> None:
    """B2: per attempt its exit code and whether it was killed for memory."""
    attempts = [ended(0, 137, oom=True), ended(1, 143, evicted="x"), ended(2, 0), running(3)]
    assert failures(attempts) == [
        AttemptFailure(0, 137, True, OOM_MESSAGE),
        AttemptFailure(1, 143, False, "pod deleted: x (exit code 143)"),
    ]


def test_an_attempt_was_evicted_when_asked_to_stop_lost_or_terminated() -> None:
    assert was_evicted(ended(code=137, evicted="preempted"))
    assert was_evicted(ended(code=None, lost=True))
    assert was_evicted(ended(code=143))
    assert not was_evicted(ended(code=137))
    assert not was_evicted(ended(code=1))


def test_the_attempt_after_a_kill_for_memory_runs_the_processes_its_memory_allows() -> None:
    """M9: fewer processes only at the retry memory, and only with a retry memory."""
    pod = PodShape(
        cores=4,
        memory_gb=4,
        processes=4,
        per_worker_gb=1,
        retry_memory_gb=3,
        retry_per_worker_gb=1.5,
    )
    assert next_processes(pod, []) == 4
    assert next_processes(pod, [ended(code=137, oom=True)]) == 2
    assert next_processes(pod, [ended(code=137), ended(1, code=143)]) == 4
    no_retry = PodShape(cores=4, memory_gb=4, processes=4, retry_per_worker_gb=1.5)
    assert next_processes(no_retry, [ended(code=137, oom=True)]) == 4


def test_a_pod_larger_than_the_node_says_so_at_the_memory_of_its_next_attempt() -> None:
    pod = shape(cores=2, memory_gb=4, retry_memory_gb=10)
    assert fit_message(pod, [], NODE) == ""
    assert fit_message(pod, [ended(code=137)], NODE) == (
        "needs 2 cores and 10 GiB; node local has 4 cores and 8 GiB"
    )
    assert fit_message(shape(cores=4, memory_gb=8), [], NODE) == ""
    assert fit_message(shape(cores=4.5, memory_gb=1), [], NODE).startswith("needs 4.5 cores")


def test_the_workflow_is_pending_then_running_then_succeeded() -> None:
    assert workflow_phase(run_views(SCAN_AFTER, {}, halted=False), halted=False) == (
        WorkflowPhase.PENDING,
        "",
    )
    going = run_views(SCAN_AFTER, {"scan-w1": [running()]}, halted=False)
    assert workflow_phase(going, halted=False) == (WorkflowPhase.RUNNING, "")
    everything = {name: [ended()] for name in ("scan-w0", "scan-w1", "scan-w2", "scan-merge")}
    done = run_views(SCAN_AFTER, everything | {"after": [ended()], "last": [ended()]}, halted=False)
    assert workflow_phase(done, halted=False) == (WorkflowPhase.SUCCEEDED, "")
    assert workflow_phase(done, halted=True) == (WorkflowPhase.STOPPED, "stopped")


def test_a_workflow_fails_once_everything_ended_naming_its_first_failed_base_pod() -> None:
    extra_failed = {"scan-w0": [ended()], "scan-w1": [ended(code=1)], "scan-w2": [ended()]}
    views = run_views(SCAN_AFTER, extra_failed | {"scan-merge": [ended(code=4)]}, halted=False)
    assert workflow_phase(views, halted=False) == (
        WorkflowPhase.FAILED,
        "pod scan-merge failed: main: Error (exit code 4)",
    )
    only_an_extra = run_views(
        SCAN_AFTER,
        extra_failed | {"scan-merge": [ended()], "after": [ended()], "last": [ended()]},
        halted=False,
    )
    assert workflow_phase(only_an_extra, halted=False) == (WorkflowPhase.SUCCEEDED, "")
    still_going = run_views(
        SCAN_AFTER, {"scan-w0": [ended(code=3)], "scan-w1": [running()]}, halted=False
    )
    assert workflow_phase(still_going, halted=False) == (WorkflowPhase.RUNNING, "")


def test_the_status_gives_each_pod_its_attempts_node_exit_and_why_it_waits() -> None:
    big = launch("r1", command_task("t", "x", pod=shape(cores=8)), command_task("u", "x"))
    attempts = {"u": [ended(0, 143, evicted="preempted by r2"), ended(1, 2)]}
    status = backend_status(big, run_views(big, attempts, halted=False), NODE, halted=False)
    assert status.pods == {
        "t": PodStatus(
            "t",
            P.QUEUED,
            attempts=0,
            node=None,
            exit_code=None,
            message="needs 8 cores and 0.5 GiB; node local has 4 cores and 8 GiB",
        ),
        "u": PodStatus(
            "u",
            P.FAILED,
            attempts=2,
            node="local",
            exit_code=2,
            message="main: Error (exit code 2)",
        ),
    }
    assert status.failures == {
        "u": [
            AttemptFailure(0, 143, False, "pod deleted: preempted by r2 (exit code 143)"),
            AttemptFailure(1, 2, False, "main: Error (exit code 2)"),
        ]
    }
    assert (status.phase, status.message) == (WorkflowPhase.RUNNING, "")


def test_a_retried_pod_says_why_its_last_attempt_ended_and_runs_on_the_node() -> None:
    one = launch("r1", command_task("t", "x"))
    views = run_views(one, {"t": [ended(0, 143, evicted="preempted"), running(1)]}, halted=False)
    status = backend_status(one, views, NODE, halted=False)
    assert status.pods["t"] == PodStatus("t", P.RUNNING, 2, "local", None, "")
    waiting = run_views(one, {"t": [ended(0, 137, oom=True)]}, halted=False)
    assert backend_status(one, waiting, NODE, halted=False).pods["t"].message == OOM_MESSAGE


# -- gaps found by mutation testing -----------------------------------------------------------


def test_a_retry_memory_below_one_gib_is_a_retry_memory_all_the_same() -> None:
    pod = PodShape(cores=1, memory_gb=0.25, per_worker_gb=0.25, retry_memory_gb=0.75)
    assert next_memory(pod, [ended(code=137, oom=True)]) == (0.75, 0.25)


def test_a_task_after_a_failed_task_is_skipped_for_that_failure() -> None:
    """A dependency failed (not another branch): the message says so."""
    views = run_views(
        SCAN_AFTER, {"scan-w0": [ended()], "scan-merge": [ended(code=4)]}, halted=False
    )
    messages = {v.spec.name: (v.phase, v.message) for v in views}
    assert messages["after"] == (P.SKIPPED, "a dependency failed")


def test_a_task_after_an_unsplit_plugin_task_waits_for_its_pod() -> None:
    exec_task = TaskLaunch("fit", "summary", False, (), plan(1))
    after = command_task("report", "x", deps=["fit"])
    two = launch("r1", exec_task, after)
    assert {v.spec.name: v.phase for v in run_views(two, {}, halted=False)}["report"] is P.WAITING
    done = run_views(two, {"fit": [ended()]}, halted=False)
    assert {v.spec.name: v.phase for v in done}["report"] is P.QUEUED
    failed = run_views(two, {"fit": [ended(code=3)]}, halted=False)
    assert {v.spec.name: v.message for v in failed}["report"] == "a dependency failed"


def test_succeeded_and_waiting_pods_carry_no_message() -> None:
    one = launch("r1", command_task("t", "x"), command_task("u", "x", deps=["t"]))
    status = backend_status(one, run_views(one, {"t": [ended()]}, halted=False), NODE, halted=False)
    assert (status.pods["t"].message, status.pods["u"].message) == ("", "")
    waiting = backend_status(
        one, run_views(one, {"t": [running()]}, halted=False), NODE, halted=False
    )
    assert waiting.pods["u"] == PodStatus("u", P.WAITING, 0, None, None, "")


def test_a_pod_half_a_gib_over_the_node_does_not_fit() -> None:
    assert fit_message(shape(cores=1, memory_gb=8.5), [], NODE) == (
        "needs 1 cores and 8.5 GiB; node local has 4 cores and 8 GiB"
    )


def test_a_pod_waiting_for_its_retry_says_why_it_ended_and_why_it_cannot_start() -> None:
    """Its last attempt's end, then the node it no longer fits at the retry memory."""
    big = launch("r1", command_task("t", "x", pod=shape(cores=1, memory_gb=4, retry_memory_gb=16)))
    views = run_views(big, {"t": [ended(0, 137, oom=True)]}, halted=False)
    status = backend_status(big, views, NODE, halted=False)
    assert status.pods["t"].message == (
        f"{OOM_MESSAGE}; needs 1 cores and 16 GiB; node local has 4 cores and 8 GiB"
    )


def test_a_stopped_or_failed_run_says_so_in_its_status() -> None:
    one = launch("r1", command_task("t", "x"))
    stopped = backend_status(
        one, run_views(one, {"t": [running()]}, halted=True), NODE, halted=True
    )
    assert (stopped.phase, stopped.message) == (WorkflowPhase.STOPPED, "stopped")
    failed = backend_status(
        one, run_views(one, {"t": [ended(code=2)]}, halted=False), NODE, halted=False
    )
    assert (failed.phase, failed.message) == (
        WorkflowPhase.FAILED,
        "pod t failed: main: Error (exit code 2)",
    )

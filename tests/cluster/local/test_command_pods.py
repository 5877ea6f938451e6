"""Command pods on the local backend: they run, keep their logs, follow the DAG, fail fast."""

from __future__ import annotations

from pathlib import Path

from cluster.local.backend import LocalBackend
from runs.ports import AttemptFailure, PodPhase, WorkflowPhase
from tests.cluster.local.builders import NODE, command_task, launch
from tests.waiting import wait_for


def phase_of(backend: LocalBackend, workflow: str, pod: str) -> PodPhase:
    return backend.status(workflow).pods[pod].phase


def test_a_command_pod_runs_and_its_log_is_kept(backend: LocalBackend) -> None:
    task = command_task("hello", "import os; print('hello from', os.environ['SIMRUN_NODE'])")
    name = backend.submit(launch("r1", task))

    wait_for(lambda: backend.status(name).phase is WorkflowPhase.SUCCEEDED, what="success")

    status = backend.status(name)
    assert status.pods["hello"].phase is PodPhase.SUCCEEDED
    assert status.pods["hello"].exit_code == 0
    assert status.pods["hello"].node == NODE
    assert status.failures == {}
    [log] = backend.logs(name, "hello")
    assert (log.pod, log.attempt, log.ended) == ("hello", 0, True)
    assert log.text == f"hello from {NODE}\n"


def test_submitting_a_workflow_twice_takes_the_first(backend: LocalBackend) -> None:
    run = launch("r1", command_task("t", "pass"))
    assert backend.submit(run) == backend.submit(run) == "wf-r1"
    wait_for(lambda: backend.status("wf-r1").phase is WorkflowPhase.SUCCEEDED)
    assert backend.status("wf-r1").pods["t"].attempts == 1


def test_a_task_starts_when_the_task_it_reads_is_done(
    backend: LocalBackend, tmp_path: Path
) -> None:
    go, made = tmp_path / "go", tmp_path / "made-by-a"
    a = command_task(
        "a",
        f"""
        import pathlib, time
        while not pathlib.Path({str(go)!r}).exists():
            time.sleep(0.02)
        pathlib.Path({str(made)!r}).write_text("a")
        """,
    )
    b = command_task(
        "b",
        f"import pathlib, sys; sys.exit(0 if pathlib.Path({str(made)!r}).exists() else 1)",
        deps=["a"],
    )
    name = backend.submit(launch("r1", a, b))

    wait_for(lambda: phase_of(backend, name, "a") is PodPhase.RUNNING)
    assert phase_of(backend, name, "b") is PodPhase.WAITING
    assert backend.status(name).phase is WorkflowPhase.RUNNING
    go.touch()

    wait_for(lambda: backend.status(name).phase is WorkflowPhase.SUCCEEDED)
    assert phase_of(backend, name, "b") is PodPhase.SUCCEEDED


def test_exit_3_fails_at_once_without_a_retry(backend: LocalBackend) -> None:
    """K7: only a stopped pod is retried; an analysis failure (3) fails its task at once."""
    name = backend.submit(launch("r1", command_task("bad", "import sys; sys.exit(3)")))

    wait_for(lambda: backend.status(name).phase is WorkflowPhase.FAILED)

    status = backend.status(name)
    assert status.pods["bad"].phase is PodPhase.FAILED
    assert status.pods["bad"].attempts == 1
    assert status.failures["bad"] == [AttemptFailure(0, 3, False, "main: Error (exit code 3)")]
    assert "bad" in status.message and "exit code 3" in status.message


def test_a_failed_task_skips_the_tasks_that_read_it(backend: LocalBackend) -> None:
    bad = command_task("bad", "import sys; sys.exit(4)")
    after = command_task("after", "pass", deps=["bad"])
    name = backend.submit(launch("r1", bad, after))

    wait_for(lambda: backend.status(name).phase is WorkflowPhase.FAILED)
    assert phase_of(backend, name, "after") is PodPhase.SKIPPED
    assert backend.logs(name, "after")[0].error == "not started"

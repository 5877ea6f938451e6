"""The memory rule of the harness: the pod's limit is enforced, not a limit per process.

When the pod nears its limit its largest unit process is killed (exit 137, a kill for
memory); the unit it held is claimed again only at more memory per worker, or, as a last
resort, by the coordinator running it alone.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simrun_harness.cgroup import Cgroup
from simrun_harness.exits import EXIT_OK, EXIT_POOL_BROKEN
from simrun_harness.ledger_reads import LedgerCounts, counts
from simrun_harness.memory import MemoryMeter
from simrun_harness.memory_kills import read_memory_kills
from tests.harness.conftest import Store, expected_counting_output, out_files

GB = 1024**3


def test_a_pod_near_its_limit_has_its_largest_unit_process_killed_and_exits_137(
    run_store: Store,
) -> None:
    """One unit far above the pod's limit; its idle neighbour process is left alone."""
    paths = run_store.write_task("allocate", {"units": 1, "mb": 300, "hold_seconds": 20})
    env = run_store.env("t-w0", processes=2, per_worker_gb=1.0, SIMRUN_MEMORY_LIMIT_GB="0.25")

    code = run_store.run("simrun-worker", env)

    assert code == EXIT_POOL_BROKEN
    report = run_store.killed_for_memory("t-w0")
    assert report.error is not None and report.error.unit == "u000000"
    assert "largest unit process" in report.error.message
    assert "0.250 GB limit" in report.error.message
    assert report.memory_limit_gb == 0.25
    assert os.listdir(paths.claimed) == []
    assert os.listdir(paths.pending) == ["u000000"]


def test_a_unit_within_its_memory_per_worker_is_not_killed_while_the_pod_has_room(
    run_store: Store,
) -> None:
    """The memory per worker is a share of the pod's budget, not a cap on a process."""
    run_store.write_task("allocate", {"units": 2, "mb": 150, "hold_seconds": 0.2})
    env = run_store.env("t-w0", processes=1, per_worker_gb=0.1, SIMRUN_MEMORY_LIMIT_GB="1")

    assert run_store.run("simrun-worker", env) == EXIT_OK

    report = run_store.report("t-w0")
    assert report.oom_kills == 0 and report.units_done == 2
    assert report.peak_memory_per_process_gb is not None
    assert report.peak_memory_per_process_gb > 0.1


def test_two_units_that_fit_alone_but_not_together_break_the_pod_and_mark_one(
    run_store: Store,
) -> None:
    """The attempt is killed for memory as any other: exit 137, one kill; only the unit whose
    process was killed is marked, the other goes back to pending for anyone."""
    paths = run_store.write_task("allocate", {"units": 2, "mb": 250, "hold_seconds": 20})
    env = run_store.env("t-w0", processes=2, per_worker_gb=0.2, SIMRUN_MEMORY_LIMIT_GB="0.45")

    assert run_store.run("simrun-worker", env) == EXIT_POOL_BROKEN

    report = run_store.killed_for_memory("t-w0")
    assert report.error is not None and report.error.unit in ("u000000", "u000001")
    marks = read_memory_kills(paths)
    assert list(marks) == [report.error.unit]
    assert marks[report.error.unit].memory_per_worker_gb == 0.2
    assert marks[report.error.unit].memory_limit_gb == 0.45
    assert sorted(os.listdir(paths.pending)) == ["u000000", "u000001"]


def _kill_one_unit(run_store: Store) -> None:
    """A coordinator at 0.2 GB per worker whose only unit breaks its pod."""
    paths = run_store.write_task("allocate", {"units": 1, "mb": 300, "hold_seconds": 0.5})
    env = run_store.env("t-w0", per_worker_gb=0.2, SIMRUN_MEMORY_LIMIT_GB="0.25")
    assert run_store.run("simrun-worker", env) == EXIT_POOL_BROKEN
    assert list(read_memory_kills(paths)) == ["u000000"]


def test_a_unit_killed_for_memory_is_not_claimed_by_an_attempt_at_first_memory(
    run_store: Store,
) -> None:
    _kill_one_unit(run_store)
    paths = run_store.task()
    env = run_store.env("t-w1", role="extra", per_worker_gb=0.2, SIMRUN_MEMORY_LIMIT_GB="0.25")

    assert run_store.run("simrun-worker", env) == EXIT_OK  # nothing pending for it

    assert run_store.report("t-w1").units_done == 0
    assert counts(paths) == LedgerCounts(pending=1, claimed=0, done=0, total=1)


def test_a_unit_killed_for_memory_is_claimed_by_the_retry_at_more_memory(
    run_store: Store,
) -> None:
    """The pod's retry after the kill runs at the retry memory and finishes the task."""
    _kill_one_unit(run_store)
    paths = run_store.task()
    env = run_store.env(
        "t-w0", per_worker_gb=0.5, SIMRUN_ATTEMPT="1", SIMRUN_MEMORY_LIMIT_GB="0.75"
    )

    assert run_store.run("simrun-worker", env) == EXIT_OK

    assert run_store.report("t-w0", attempt=1).units_done == 1
    assert counts(paths) == LedgerCounts(pending=0, claimed=0, done=1, total=1)


@pytest.mark.parametrize(
    ("broken", "attempt"), [("t-w0", "1"), ("t-w1", "0")], ids=["own-earlier-attempt", "other-pod"]
)
def test_the_coordinator_runs_a_marked_unit_alone_when_no_attempt_at_more_memory_does(
    run_store: Store, broken: str, attempt: str
) -> None:
    """A task still finishes when no retry takes the unit: the coordinator, back at first
    memory after a preemption of its own retry, or once the mark of another pod is older
    than the stale time, takes it when nothing else is pending or claimed; alone in the
    pod, it fits."""
    paths = run_store.write_task("allocate", {"units": 2, "mb": 250, "hold_seconds": 3})
    first = dict(processes=2, per_worker_gb=0.2, SIMRUN_MEMORY_LIMIT_GB="0.45")
    assert run_store.run("simrun-worker", run_store.env(broken, **first)) == EXIT_POOL_BROKEN
    assert len(read_memory_kills(paths)) == 1

    again = run_store.env("t-w0", SIMRUN_ATTEMPT=attempt, SIMRUN_COORDINATOR_MERGES="1", **first)
    assert run_store.run("simrun-worker", again) == EXIT_OK

    report = run_store.report("t-w0", attempt=int(attempt))
    assert report.units_done == 2 and report.oom_kills == 0
    assert "running it alone" in run_store.started[-1].log()
    assert out_files(paths) == expected_counting_output(2)


def _cgroup(root: Path, *, limit_gb: float, anon_gb: float) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "memory.max").write_text(f"{int(limit_gb * GB)}\n")
    (root / "memory.stat").write_text(f"anon {int(anon_gb * GB)}\nfile 0\n")
    (root / "memory.events").write_text("oom 0\noom_kill 0\n")
    return root


def test_in_the_pods_cgroup_its_anonymous_memory_near_memory_max_kills_a_unit_process(
    run_store: Store,
) -> None:
    paths = run_store.write_task("sleep", {"units": 4, "seconds": 60})
    cgroup = _cgroup(run_store.root.parent / "cgroup", limit_gb=2.0, anon_gb=0.5)
    env = run_store.env("t-w0", processes=2, SIMRUN_CGROUP_ROOT=str(cgroup))
    worker = run_store.start("simrun-worker", env)
    run_store.wait_claims("t-w0", count=2)

    (cgroup / "memory.stat").write_text(f"anon {int(1.99 * GB)}\nfile 0\n")

    assert worker.wait() == EXIT_POOL_BROKEN
    report = run_store.killed_for_memory("t-w0")
    assert report.memory_source == "cgroup" and report.memory_limit_gb == 2.0
    assert report.error is not None
    assert list(read_memory_kills(paths)) == [report.error.unit]


def test_a_cgroup_whose_limit_is_not_the_pods_is_not_taken_for_the_pod(
    run_store: Store,
) -> None:
    """A local pod runs inside the service's cgroup: its processes are measured instead."""
    run_store.write_task("sleep", {"units": 1, "seconds": 0.1})
    cgroup = _cgroup(run_store.root.parent / "cgroup", limit_gb=64.0, anon_gb=63.9)
    env = run_store.env("t-w0", SIMRUN_CGROUP_ROOT=str(cgroup), SIMRUN_MEMORY_LIMIT_GB="1")

    assert run_store.run("simrun-worker", env) == EXIT_OK

    report = run_store.report("t-w0")
    assert report.memory_source == "processes" and report.memory_limit_gb == 1.0
    assert report.peak_memory_gb is not None and report.peak_memory_gb < 1.0


def test_kills_in_memory_events_count_without_memory_stat_when_the_limit_is_the_pods(
    tmp_path: Path,
) -> None:
    """C8: a cgroup of memory.max and memory.events only (the cluster simulator's) counts
    the pod's kills for memory when its limit is the pod's; memory is then measured from the
    processes."""
    (tmp_path / "memory.max").write_text(f"{GB}\n")
    (tmp_path / "memory.events").write_text("oom 0\noom_kill 0\n")
    ours = MemoryMeter(Cgroup(tmp_path), explicit_limit_gb=1.0)
    other = MemoryMeter(Cgroup(tmp_path), explicit_limit_gb=2.0)
    (tmp_path / "memory.events").write_text("oom 1\noom_kill 1\n")
    assert (ours.source, ours.cgroup_oom_kills()) == ("processes", 1)
    assert other.cgroup_oom_kills() == 0

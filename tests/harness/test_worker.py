"""simrun-worker as real processes on a real ledger: sharing, faults, signals, exit codes."""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest

from simrun_harness.exits import (
    EXIT_ANALYSIS,
    EXIT_OK,
    EXIT_POOL_BROKEN,
    EXIT_TERMINATED,
)
from simrun_harness.ledger_reads import LedgerCounts, counts
from simrun_harness.progress import read_progress
from tests.harness.conftest import Store, expected_counting_output, out_files


def test_extras_started_before_the_coordinator_wait_for_its_ledger_and_then_help(
    run_store: Store,
) -> None:
    paths = run_store.write_task("sleep", {"units": 12, "seconds": 0.25})
    extras = [
        run_store.start("simrun-worker", run_store.env(f"t-w{i}", role="extra")) for i in (1, 2)
    ]
    for extra in extras:
        extra.wait_log("waiting for the ledger")
    assert counts(paths) is None
    assert all(extra.process.poll() is None for extra in extras)

    coordinator = run_store.start("simrun-worker", run_store.env("t-w0"))

    assert coordinator.wait() == EXIT_OK
    assert [extra.wait() for extra in extras] == [EXIT_OK, EXIT_OK]
    reports = [run_store.report(f"t-w{i}") for i in range(3)]
    assert all(report.units_done > 0 for report in reports[1:]), reports
    assert sum(report.units_done for report in reports) == 12
    assert counts(paths) == LedgerCounts(pending=0, claimed=0, done=12, total=12)


def test_kill_9_of_a_worker_mid_unit_is_taken_back_after_the_stale_time(
    run_store: Store,
) -> None:
    paths = run_store.write_task("sleep", {"units": 6, "seconds": 0.4})
    extra = run_store.start("simrun-worker", run_store.env("t-w1", role="extra", stale_s=3))
    coordinator = run_store.start(
        "simrun-worker", run_store.env("t-w0", stale_s=3, SIMRUN_COORDINATOR_MERGES="1")
    )
    run_store.wait_claims("t-w1")

    extra.signal_group(signal.SIGKILL)

    assert extra.wait() == -signal.SIGKILL
    lost = run_store.claimed_by("t-w1")  # frozen: its holder is dead, not yet stale
    assert lost
    assert coordinator.wait() == EXIT_OK
    events = list(read_progress(paths.progress))
    returned = [e for e in events if e.event == "claims_returned" and e.holder == "t-w1@0"]
    assert returned and set(lost) <= set(returned[0].units or [])
    assert sorted(run_store.done_units()) == [f"u{i:06d}" for i in range(6)]
    assert out_files(paths) == expected_counting_output(6)
    # The half-written output of the killed holder is gone with the task's end
    assert sorted(os.listdir(paths.units)) == [f"u{i:06d}" for i in range(6)]


@pytest.mark.parametrize("whole_group", [False, True], ids=["main-process", "process-group"])
def test_sigterm_returns_the_claims_writes_the_report_and_exits_143(
    run_store: Store, whole_group: bool
) -> None:
    """K2: a preempted worker gives its claims back and reports before it goes."""
    paths = run_store.write_task("sleep", {"units": 4, "seconds": 30})
    worker = run_store.start("simrun-worker", run_store.env("t-w0", processes=2))
    held = run_store.wait_claims("t-w0", count=2)

    if whole_group:
        worker.signal_group(signal.SIGTERM)
    else:
        os.kill(worker.pid, signal.SIGTERM)

    assert worker.wait() == EXIT_TERMINATED
    report = run_store.report("t-w0")
    assert report.exit_code == EXIT_TERMINATED
    assert report.claims_returned == 2
    assert os.listdir(paths.claimed) == []
    assert set(held) <= set(os.listdir(paths.pending))


def test_without_a_pod_limit_a_unit_over_its_memory_per_worker_breaks_the_pool_with_137(
    run_store: Store,
) -> None:
    """The fallback of the memory rule: no SIMRUN_MEMORY_LIMIT_GB and no cgroup limit."""
    paths = run_store.write_task("allocate", {"units": 1, "mb": 300, "hold_seconds": 20})
    no_cgroup = run_store.root.parent / "no-cgroup"  # whatever cgroup the tests run in
    no_cgroup.mkdir()
    env = run_store.env("t-w0", per_worker_gb=0.2, SIMRUN_CGROUP_ROOT=str(no_cgroup))

    code = run_store.run("simrun-worker", env)

    assert code == EXIT_POOL_BROKEN
    report = run_store.killed_for_memory("t-w0")
    assert report.error is not None and report.error.unit == "u000000"
    assert report.peak_memory_per_process_gb is not None
    assert report.peak_memory_per_process_gb > 0.2
    assert os.listdir(paths.claimed) == []


def test_a_raising_unit_fails_the_task_with_3_and_names_the_unit(run_store: Store) -> None:
    paths = run_store.write_task("fail", {"units": 3, "fail_unit": 1})

    code = run_store.run("simrun-worker", run_store.env("t-w0"))

    assert code == EXIT_ANALYSIS
    report = run_store.report("t-w0")
    assert report.exit_code == EXIT_ANALYSIS
    assert report.error is not None
    assert report.error.unit == "u000001"
    assert report.error.value == 1
    assert "fails on purpose" in (report.error.traceback or "")
    assert os.listdir(paths.claimed) == []


def test_a_units_listing_that_raises_in_the_pod_shows_its_traceback_in_the_pod_s_log(
    run_store: Store,
) -> None:
    """`simrun logs` and the run page show a pod's log: the traceback is there, not only in
    the report."""
    run_store.write_task("fail", {"units": 3, "in_pods": True})

    started = run_store.start("simrun-worker", run_store.env("t-w0"))

    assert started.wait(60) == EXIT_ANALYSIS
    log = started.log()
    assert "listing the units raised:\nTraceback (most recent call last):" in log
    assert "RuntimeError: listing the units fails on purpose" in log


def test_a_worker_frozen_past_the_stale_time_cannot_count_its_late_unit_twice(
    run_store: Store,
) -> None:
    paths = run_store.write_task("sleep", {"units": 4, "seconds": 0.6})
    extra = run_store.start("simrun-worker", run_store.env("t-w1", role="extra", stale_s=2))
    coordinator = run_store.start("simrun-worker", run_store.env("t-w0", stale_s=2))
    run_store.wait_claims("t-w1")
    extra.signal_group(signal.SIGSTOP)
    try:
        frozen = run_store.claimed_by("t-w1")  # what it holds while stopped
        assert frozen
        assert coordinator.wait() == EXIT_OK  # it took the units back and computed them
        assert set(frozen) <= set(os.listdir(paths.done))
    finally:
        extra.signal_group(signal.SIGCONT)

    assert extra.wait() == EXIT_OK
    done = Counter(run_store.done_units())
    assert done == Counter({f"u{i:06d}": 1 for i in range(4)})
    late = run_store.report("t-w1")
    assert late.claims_lost >= 1
    assert late.units_done + run_store.report("t-w0").units_done == 4
    assert sorted(os.listdir(paths.units)) == [f"u{i:06d}" for i in range(4)]

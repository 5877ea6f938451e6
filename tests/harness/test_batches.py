"""Short units go out in batches of claims and their results are read in batches: the rules,
the ring of a process running low, a death inside a batch, a killed holder, live progress."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from simrun_harness.batching import (
    LINGER_MAX_S,
    MAX_QUEUED,
    queue_depth,
    results_may_wait,
    ring_at,
    wants_more,
)
from simrun_harness.exits import EXIT_OK
from simrun_harness.jobs import Job, JobResult, JobRunner
from simrun_harness.plugin import NoSettings, SplitTaskType, TaskContext
from simrun_harness.pool import Death, PoolEvent, ProcessPool
from simrun_harness.progress import read_progress
from tests.harness.conftest import Store, expected_counting_output, out_files
from tests.waiting import wait_for


def test_short_units_are_queued_in_batches_long_ones_one_at_a_time_and_fairly_at_the_end() -> None:
    assert queue_depth(None, left=1000, processes=2) == (1, 1)  # no unit time known yet
    assert queue_depth(0.5, left=1000, processes=2) == (1, 1)  # a long unit queues nothing
    low, depth = queue_depth(0.005, left=1000, processes=2)
    assert depth == 1 + MAX_QUEUED and low == (depth + 1) // 2  # topped up at half
    assert queue_depth(0.05, left=1000, processes=2) == (3, 6)  # 0.25 s queued behind it
    assert queue_depth(0.005, left=10, processes=2) == (3, 6)  # a fair share of what is left
    assert queue_depth(0.005, left=0, processes=2) == (1, 1)


def test_results_wait_unread_only_while_every_busy_process_holds_a_queue_that_rings() -> None:
    assert ring_at(1) is None and ring_at(12) == 11  # rings where it is topped up
    assert results_may_wait([(24, 11), (12, 11)], low=12) == LINGER_MAX_S
    assert results_may_wait([(24, 11), (0, None)], low=12) == LINGER_MAX_S  # one idle
    assert results_may_wait([(24, 11), (11, 11)], low=12) == 0  # one low: the last units
    assert results_may_wait([(24, 11), (12, None)], low=12) == 0  # a queue that never rings
    assert results_may_wait([(1, None), (1, None)], low=1) == 0  # no batches: each at once
    assert results_may_wait([(0, None)], low=12) == 0


def test_a_process_that_rang_is_topped_up_even_where_the_refill_point_fell_below_it() -> None:
    """Sent to ring with 12 left (the refill point was 13), it rang; the units' mean time rose
    meanwhile and the point is 12 now. The ring is its call for more: it is topped up, and
    no result is left to wait on a ring that already came."""
    point = ring_at(13)
    assert point == 12
    assert wants_more(12, point, low=12), "rang: topped up at once"
    assert not wants_more(13, point, low=12), "its ring is still to come"
    assert wants_more(11, None, low=12), "below the refill point"
    assert results_may_wait([(12, point), (20, 11)], low=12) == 0
    assert results_may_wait([(13, point), (20, 11)], low=12) == LINGER_MAX_S


def _one_process_pool(tmp_path: Path, task_type: SplitTaskType) -> tuple[ProcessPool, Path]:
    """A started pool of one process running `task_type`'s units into `tmp_path/units`."""
    units = tmp_path / "units"
    units.mkdir()
    context = TaskContext(task_id="t", settings=NoSettings(), scratch=tmp_path / "scratch")
    pool = ProcessPool(JobRunner(task_type, context, units, "t-w0@0"), 1)
    pool.start()
    return pool, units


def _lingering_wait(pool: ProcessPool, events: list[PoolEvent]) -> threading.Thread:
    """A worker's wait that lets results wait (for up to 600 s), into `events` once it
    ends; not started."""
    return threading.Thread(target=lambda: events.extend(pool.wait(600, linger=600)), daemon=True)


class _WaitsFor(SplitTaskType):
    """A unit whose value names a file runs until that file is beside the units; a unit of
    None writes nothing."""

    name: ClassVar[str] = "waits-for"
    settings_model: ClassVar[type[BaseModel]] = NoSettings

    def run_unit(self, ctx: TaskContext, unit: Any, out: Path) -> None:
        while unit is not None and not (out.parent / unit).exists():
            time.sleep(0.01)  # the unit's own work: it runs until released


def test_results_wait_unread_until_their_process_runs_low_and_rings(tmp_path: Path) -> None:
    """A batch of 4 that rings with 1 left: the results of its first two units do not end a
    wait that lets results wait; the third, leaving 1, rings and ends it at once."""
    pool, units = _one_process_pool(tmp_path, _WaitsFor())
    events: list[PoolEvent] = []
    waiting = _lingering_wait(pool, events)
    try:
        values = [None, None, "go", None]
        pool.submit(
            pool.slots[0], *(Job("unit", f"u{i}", v) for i, v in enumerate(values)), ring_at=1
        )
        waiting.start()
        # u2 started, so the results of u0 and u1 are sent
        wait_for(lambda: any(n.startswith(".u2.") for n in os.listdir(units)), what="u2 to start")
        waiting.join(1.0)
        assert waiting.is_alive(), "two results ended the wait before the process ran low"
        (units / "go").touch()
        wait_for(lambda: not waiting.is_alive(), timeout=60, what="the ring to end the wait")
    finally:
        pool.shutdown(kill=True)
    names = [e.job.name for e in events if isinstance(e, JobResult)]
    assert names[:3] == ["u0", "u1", "u2"], names


def test_a_pool_process_that_rang_is_due_for_more_though_it_holds_the_refill_point(
    tmp_path: Path,
) -> None:
    """A batch of 4 sent to ring with 2 left (refill point 3); the point fell to 2 before the
    ring. Once it rings, its process is the one to top up and its results are not left to
    wait: else it would run its last two units and sit idle until the worker's linger ran
    out."""
    pool, units = _one_process_pool(tmp_path, _WaitsFor())
    try:
        values = [None, None, "go", None]
        slot = pool.slots[0]
        pool.submit(slot, *(Job("unit", f"u{i}", v) for i, v in enumerate(values)), ring_at=2)
        assert pool.due_slot(2) is None, "four held, no ring yet"

        events = pool.wait(600, linger=600)  # ended by the ring, two results in

        assert [e.job.name for e in events if isinstance(e, JobResult)] == ["u0", "u1"]
        assert pool.due_slot(2) is slot
        assert results_may_wait(pool.queues(), low=2) == 0
        (units / "go").touch()
    finally:
        pool.shutdown(kill=True)


def test_a_batch_no_longer_than_its_ring_point_rings_as_its_process_takes_it(
    tmp_path: Path,
) -> None:
    """A process that rang holding more than today's refill point gets a short top-up: with
    one job, sent to ring at 2, it rings as it takes it, not once it has run it and sits
    empty while the worker sleeps."""
    pool, units = _one_process_pool(tmp_path, _WaitsFor())
    events: list[PoolEvent] = []
    waiting = _lingering_wait(pool, events)
    try:
        slot = pool.slots[0]
        pool.submit(slot, Job("unit", "u0", "go0"))  # what it holds, no ring asked
        pool.submit(slot, Job("unit", "u1", "go1"), ring_at=2)  # the top-up
        waiting.start()
        (units / "go0").touch()
        wait_for(lambda: not waiting.is_alive(), timeout=30, what="the ring, u1 still running")
        assert any(n.startswith(".u1.") for n in os.listdir(units)), "u1 runs"
        assert not (units / "u1").exists()
        (units / "go1").touch()
    finally:
        pool.shutdown(kill=True)
    assert [e.job.name for e in events if isinstance(e, JobResult)] == ["u0"]


def test_a_running_worker_s_progress_lines_appear_as_its_units_are_done(
    run_store: Store,
) -> None:
    """Results are read in batches, and their lines written at each wake, not at the end."""
    units = 200
    paths = run_store.write_task("sleep", {"units": units, "seconds": 0.02})
    worker = run_store.start("simrun-worker", run_store.env("t-w0", processes=2))

    seen = wait_for(lambda: list(read_progress(paths.progress)), timeout=60, what="progress")

    assert len(seen) < units  # 2 s of units at least: lines came while it ran
    assert worker.wait() == EXIT_OK
    assert len(list(read_progress(paths.progress))) == units


class _Dies(SplitTaskType):
    """Unit "die" kills its own process; any other unit writes nothing."""

    name: ClassVar[str] = "dies"
    settings_model: ClassVar[type[BaseModel]] = NoSettings

    def run_unit(self, ctx: TaskContext, unit: Any, out: Path) -> None:
        if unit == "die":
            os.kill(os.getpid(), signal.SIGKILL)


def test_a_death_inside_a_batch_names_its_own_unit_after_the_results_before_it(
    tmp_path: Path,
) -> None:
    pool, units = _one_process_pool(tmp_path, _Dies())
    try:
        slot = pool.free_slot(1)
        assert slot is not None
        batch = [Job("unit", f"u{i}", value) for i, value in enumerate(["ok", "die", "ok"])]
        pool.submit(slot, *batch)
        events: list[PoolEvent] = []

        def dead() -> bool:
            events.extend(pool.wait(0.1))
            return any(isinstance(e, Death) for e in events)

        wait_for(dead, timeout=30, what="the pool process to die")
    finally:
        pool.shutdown(kill=True)
    results = [e for e in events if isinstance(e, JobResult)]
    deaths = [e for e in events if isinstance(e, Death)]
    assert [(r.job.name, r.ok) for r in results] == [("u0", True)]
    assert len(deaths) == 1 and deaths[0].job is not None and deaths[0].job.name == "u1"
    assert {"u0", "u1", "u2"} & set(os.listdir(units)) == {"u0"}  # u2 never ran


def test_a_killed_worker_s_batch_of_claims_is_taken_back_and_no_unit_is_done_twice(
    run_store: Store,
) -> None:
    units = 150
    paths = run_store.write_task("sleep", {"units": units, "seconds": 0.02})
    extra = run_store.start("simrun-worker", run_store.env("t-w1", role="extra", stale_s=2))
    coordinator = run_store.start(
        "simrun-worker", run_store.env("t-w0", stale_s=2, SIMRUN_COORDINATOR_MERGES="1")
    )
    run_store.wait_claims("t-w1", count=3)  # a batch: more than the running unit and one

    extra.signal_group(signal.SIGKILL)

    assert extra.wait() == -signal.SIGKILL
    lost = run_store.claimed_by("t-w1")
    assert len(lost) >= 2, lost  # it died holding a batch
    assert coordinator.wait() == EXIT_OK
    returned = [
        name
        for e in read_progress(paths.progress)
        if e.event == "claims_returned" and e.holder == "t-w1@0"
        for name in e.units or []
    ]
    assert set(lost) <= set(returned)
    assert Counter(run_store.done_units()) == Counter({f"u{i:06d}": 1 for i in range(units)})
    assert out_files(paths) == expected_counting_output(units)
    assert sorted(os.listdir(paths.done)) == [f"u{i:06d}" for i in range(units)]

"""Half-written unit outputs swept once their holder is gone; ages compared to the second.

Gaps found by mutation testing (docs/testing.md): `sweep_partials` had no test of its own
(only the pool's end-to-end tests reach it), and the stale and mark ages were compared with
the clock running. Here "now" (the coordinator's heartbeat) is pinned and every heartbeat and
mark has a time set to the second, so a limit is hit exactly.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simrun_harness.layout import TaskPaths
from simrun_harness.ledger import Holder, Ledger, partial_unit, unit_names
from simrun_harness.ledger_creation import create_ledger

NOW = 1_000_000.0
STALE = 60.0


def at(path: Path, seconds: float) -> None:
    """Create `path` if needed and set its time to `seconds` (exact in a float)."""
    path.touch()
    os.utime(path, (seconds, seconds))


def pinned(paths: TaskPaths, holder: Holder, **options: float) -> Ledger:
    """A holder whose heartbeat answers NOW (the file server's clock, pinned)."""
    ledger = Ledger(paths, holder, **options)
    ledger.heartbeat = lambda: NOW  # type: ignore[method-assign]
    return ledger


@pytest.fixture
def paths(tmp_path: Path) -> TaskPaths:
    paths = TaskPaths(tmp_path / "task")
    create_ledger(paths, list(range(20)), Holder("t-w0", 0))
    return paths


def test_a_partial_output_is_named_by_its_unit_holder_and_pid() -> None:
    assert partial_unit(".u000001.t-w1@0.123") == ("u000001", "t-w1@0")
    assert partial_unit(".u000001.a.b@2.7") == ("u000001", "a.b@2")
    for entry in ("u000001", ".u000001", ".u000001.t-w1@0", ".u1.t@0.x1", "..t@0.1", ".u1..1"):
        assert partial_unit(entry) is None, entry


def test_a_partial_output_is_swept_once_its_unit_is_done_and_its_holder_gone(
    paths: TaskPaths,
) -> None:
    """Removed: a done unit's output of a holder whose heartbeat is older than the stale
    time, gone, or an earlier attempt of our worker. Kept: our own, a holder's at the limit
    or fresher, a later attempt's, and any output of a unit not done."""
    names = unit_names(20)
    me = pinned(paths, Holder("t-w0", 1))
    at(paths.heartbeats / "t-w0@0", NOW)  # our earlier attempt: over whatever its beat
    at(paths.heartbeats / "t-w0@2", NOW)
    at(paths.heartbeats / "t-w1@0", NOW - STALE)  # at the limit: alive
    at(paths.heartbeats / "t-w2@0", NOW - STALE - 1)
    holders = ["t-w0@1", "t-w0@0", "t-w0@2", "t-w1@0", "t-w2@0", "t-w3@0"]
    removed, kept = [], []
    for index, token in enumerate(holders):
        done, open_ = names[index], names[10 + index]
        (paths.done / done).touch()
        for name, gone in ((done, token in ("t-w0@0", "t-w2@0", "t-w3@0")), (open_, False)):
            entry = f".{name}.{token}.4{index}"
            (paths.units / entry).mkdir()
            (paths.units / entry / "out").write_text("half")
            (removed if gone else kept).append(entry)
    (paths.units / names[0]).mkdir()  # a finished output: never swept
    kept.append(names[0])

    assert sorted(me.sweep_partials(stale_s=STALE)) == sorted(removed)
    assert sorted(os.listdir(paths.units)) == sorted(kept)


def test_claims_are_reclaimed_past_the_stale_time_not_at_it(paths: TaskPaths) -> None:
    own, limit, late = (Ledger(paths, Holder(w, 0)) for w in ("t-w0", "t-w1", "t-w2"))
    taken = {ledger.holder.token: ledger.claim() for ledger in (own, limit, late)}
    at(paths.heartbeats / "t-w1@0", NOW - STALE)
    at(paths.heartbeats / "t-w2@0", NOW - STALE - 1)
    assert pinned(paths, Holder("t-w0", 0)).reclaim_stale(STALE) == [(taken["t-w2@0"], "t-w2@0")]


def test_a_new_attempt_returns_only_its_workers_earlier_claims(paths: TaskPaths) -> None:
    """Not its own claims, nor those of another worker's earlier attempt numbers."""
    earlier, other = Ledger(paths, Holder("t-w1", 0)), Ledger(paths, Holder("t-w2", 0))
    now = Ledger(paths, Holder("t-w1", 1))
    lost, mine, others = earlier.claim(), now.claim(), other.claim()
    assert now.return_earlier_attempts() == [(lost, "t-w1@0")]
    assert now.commit(mine) and other.commit(others)


def test_a_mark_is_old_enough_for_the_last_resort_only_past_the_wait(paths: TaskPaths) -> None:
    """The coordinator takes a unit another worker marked when the mark is older than the
    wait, not when it is exactly that old."""
    extra = Ledger(paths, Holder("t-w1", 0), memory_per_worker_gb=1.0)
    units = [n for n in iter(extra.claim, None) if n]
    for name in units:
        extra.mark_memory_kill(name, memory_per_worker_gb=1.0, memory_limit_gb=2.0)
    extra.give_back(units)
    for name in units:
        at(paths.memory_kills / name, NOW - STALE)
    coordinator = pinned(paths, Holder("t-w0", 0), memory_per_worker_gb=1.0)
    assert coordinator.claim_memory_killed(older_than_s=STALE) is None
    at(paths.memory_kills / max(units), NOW - STALE - 1)  # after every recent mark
    assert coordinator.claim_memory_killed(older_than_s=STALE) == max(units)

"""The ledger: created once, claims by rename with one winner, stale claims taken back."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from simrun_harness import ledger as ledger_module
from simrun_harness.layout import TaskPaths
from simrun_harness.ledger import (
    Holder,
    Ledger,
    LedgerCounts,
    claims_by_worker,
    counts,
    create_ledger,
    read_units,
    unit_names,
)


def _paths(tmp_path: Path) -> TaskPaths:
    return TaskPaths(tmp_path / "task")


def test_the_ledger_is_created_once_with_every_unit_pending(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    assert counts(paths) is None

    assert create_ledger(paths, [{"a": 1}, {"a": 2}, {"a": 3}], Holder("t-w0", 0))
    assert not create_ledger(paths, [{"other": True}], Holder("t-w0", 1))

    assert read_units(paths) == [{"a": 1}, {"a": 2}, {"a": 3}]
    assert counts(paths) == LedgerCounts(pending=3, claimed=0, done=0, total=3)
    assert [n for n in os.listdir(paths.root) if n.startswith(".ledger")] == []


def test_pending_units_share_few_inodes_but_stay_separate_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger_module, "LINKS_PER_INODE", 3)
    paths = _paths(tmp_path)
    create_ledger(paths, list(range(7)), Holder("t-w0", 0))

    stats = [os.stat(paths.pending / name) for name in unit_names(7)]

    assert len({st.st_ino for st in stats}) == 3
    assert max(st.st_nlink for st in stats) == 3
    ledger = Ledger(paths, Holder("t-w1", 0))
    assert sorted(n for n in iter(ledger.claim, None) if n) == unit_names(7)


def test_unit_names_sort_in_unit_order_beyond_a_million() -> None:
    names = unit_names(1_000_001)
    assert names[:2] == ["u0000000", "u0000001"] and sorted(names) == names


def _claim_all(root: str, worker: str, found: multiprocessing.Queue[list[str]]) -> None:
    ledger = Ledger(TaskPaths(Path(root)), Holder(worker, 0))
    mine = []
    while (name := ledger.claim()) is not None:
        mine.append(name)
        assert ledger.commit(name)
    found.put(mine)


def test_concurrent_claims_have_exactly_one_winner(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    create_ledger(paths, list(range(400)), Holder("t-w0", 0))
    context = multiprocessing.get_context("fork")
    found: multiprocessing.Queue[list[str]] = context.Queue()
    workers = [
        context.Process(target=_claim_all, args=(str(paths.root), f"t-w{i}", found))
        for i in range(4)
    ]
    for worker in workers:
        worker.start()
    claimed = [found.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(30)

    every = [name for mine in claimed for name in mine]
    assert sorted(every) == unit_names(400)
    assert all(worker.exitcode == 0 for worker in workers)
    assert counts(paths) == LedgerCounts(pending=0, claimed=0, done=400, total=400)


def test_a_stale_claim_goes_back_to_pending_and_its_holder_cannot_commit_it(
    tmp_path: Path,
) -> None:
    paths = _paths(tmp_path)
    create_ledger(paths, [0, 1], Holder("t-w0", 0))
    coordinator = Ledger(paths, Holder("t-w0", 0))
    live, frozen = Ledger(paths, Holder("t-w1", 0)), Ledger(paths, Holder("t-w2", 0))
    for ledger in (live, frozen):
        ledger.heartbeat()
    live_unit, frozen_unit = live.claim(), frozen.claim()
    assert live_unit and frozen_unit
    long_ago = time.time() - 3600
    os.utime(paths.heartbeats / "t-w2@0", (long_ago, long_ago))

    assert coordinator.reclaim_stale(stale_s=60) == [(frozen_unit, "t-w2@0")]

    assert not frozen.commit(frozen_unit)
    assert live.commit(live_unit)
    assert counts(paths) == LedgerCounts(pending=1, claimed=0, done=1, total=2)


def test_a_new_attempt_takes_back_the_claims_of_its_earlier_attempt(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    create_ledger(paths, [0, 1, 2], Holder("t-w1", 0))
    first = Ledger(paths, Holder("t-w1", 0))
    first.heartbeat()
    held = first.claim()
    assert claims_by_worker(paths) == {"t-w1": 1}

    assert Ledger(paths, Holder("t-w1", 1)).return_earlier_attempts() == [(held, "t-w1@0")]

    assert claims_by_worker(paths) == {}
    assert counts(paths) == LedgerCounts(pending=3, claimed=0, done=0, total=3)


def test_given_back_claims_are_pending_again(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    create_ledger(paths, [0, 1, 2], Holder("t-w0", 0))
    ledger = Ledger(paths, Holder("t-w0", 0))
    held = [ledger.claim(), ledger.claim()]

    assert ledger.give_back([h for h in held if h]) == 2

    assert counts(paths) == LedgerCounts(pending=3, claimed=0, done=0, total=3)


def test_a_unit_marked_killed_for_memory_is_claimed_only_with_more_memory_per_worker(
    tmp_path: Path,
) -> None:
    paths = _paths(tmp_path)
    create_ledger(paths, [0, 1], Holder("t-w0", 0))
    broke = Ledger(paths, Holder("t-w1", 0), memory_per_worker_gb=1.0)
    held = [broke.claim(), broke.claim()]
    heavy = held[0]
    assert heavy is not None
    broke.mark_memory_kill(heavy, memory_per_worker_gb=1.0, memory_limit_gb=2.5)
    broke.mark_memory_kill(heavy, memory_per_worker_gb=0.5, memory_limit_gb=1.5)  # no lower
    broke.give_back([n for n in held if n])

    first = Ledger(paths, Holder("t-w2", 0), memory_per_worker_gb=1.0)
    assert [first.claim(), first.claim()] == [held[1], None]
    retry = Ledger(paths, Holder("t-w1", 1), memory_per_worker_gb=1.25)
    assert retry.claim() == heavy
    assert broke.memory_kills()[heavy].memory_limit_gb == 2.5

"""The ledger: created once, claims by rename with one winner, stale claims taken back."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
import tracemalloc
import zlib
from collections.abc import Set as AbstractSet
from datetime import datetime
from pathlib import Path

import pytest

from simrun_harness import ledger as ledger_module
from simrun_harness import ledger_creation
from simrun_harness.layout import TaskPaths
from simrun_harness.ledger import Holder, Ledger, unit_index, unit_names
from simrun_harness.ledger_creation import create_ledger
from simrun_harness.ledger_reads import (
    LedgerCounts,
    UnitNames,
    claims_by_worker,
    counts,
    read_units,
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
    monkeypatch.setattr(ledger_creation, "LINKS_PER_INODE", 3)
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


# --- gaps found by mutation testing (docs/testing.md) ---------------------------------------


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_holder_is_parsed_from_its_token_or_refused() -> None:
    """A worker name may hold the separator; a token without worker or attempt is none."""
    assert Holder.parse("scan@x-w1@3") == Holder("scan@x-w1", 3)
    assert Holder.parse("@3") is None
    assert Holder.parse("scan-w1@") is None
    assert Holder.parse("scan-w1") is None


def test_a_unit_name_gives_back_its_index_and_names_are_six_digits_at_least() -> None:
    assert unit_names(2) == ["u000000", "u000001"]
    assert [unit_index(n) for n in unit_names(3)] == [0, 1, 2]
    assert unit_index("u1000000") == 1_000_000


def test_claims_are_counted_per_worker_over_its_attempts(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    create_ledger(paths, [0, 1, 2], Holder("t-w0", 0))
    first, second = Ledger(paths, Holder("t-w1", 0)), Ledger(paths, Holder("t-w1", 1))
    assert first.claim() and second.claim()
    assert claims_by_worker(paths) == {"t-w1": 2}


def test_the_ledger_records_its_format_total_and_creator(tmp_path: Path) -> None:
    """The meta file says the ledger's format, its number of units, when and by whom it was
    made; every state directory exists from the start."""
    paths = _paths(tmp_path / "deep" / "er")
    assert create_ledger(paths, [1, 2, 3], Holder("t-w0", 2))
    meta = json.loads((paths.ledger / "meta.json").read_text())
    assert (meta["format"], meta["total"], meta["created_by"]) == (1, 3, "t-w0@2")
    assert datetime.fromisoformat(meta["created_at"]).tzinfo is not None
    assert paths.memory_kills.is_dir() and paths.heartbeats.is_dir()
    assert sorted(os.listdir(paths.root)) == ["ledger", "units"]  # no temporary left


def test_the_coordinator_takes_a_marked_unit_only_as_a_last_resort(tmp_path: Path) -> None:
    """Whatever its memory, the coordinator claims a unit marked killed for memory only when
    nobody holds a claim, and only if its own worker's earlier attempt marked it or the mark
    is older than the wait given."""
    paths = _paths(tmp_path)
    create_ledger(paths, [0, 1, 2], Holder("t-w0", 0))
    extra = Ledger(paths, Holder("t-w1", 0), memory_per_worker_gb=1.0)
    mine = Ledger(paths, Holder("t-w0", 0), memory_per_worker_gb=1.0)
    by_extra, by_mine, held = extra.claim(), mine.claim(), extra.claim()
    assert by_extra and by_mine and held
    extra.mark_memory_kill(by_extra, memory_per_worker_gb=1.0, memory_limit_gb=2.0)
    mine.mark_memory_kill(by_mine, memory_per_worker_gb=1.0, memory_limit_gb=2.0)
    extra.give_back([by_extra])
    mine.give_back([by_mine])
    retry = Ledger(paths, Holder("t-w0", 1), memory_per_worker_gb=1.0)
    assert retry.claim() is None  # both marked at its memory

    assert retry.claim_memory_killed(older_than_s=60) is None  # a claim is still held
    assert extra.commit(held)
    assert retry.claim_memory_killed(older_than_s=60) == by_mine  # its own earlier attempt
    assert retry.commit(by_mine)
    assert retry.claim_memory_killed(older_than_s=60) is None  # the other mark is recent
    _age(paths.memory_kills / by_extra, 61)
    assert retry.claim_memory_killed(older_than_s=60) == by_extra
    assert counts(paths) == LedgerCounts(pending=0, claimed=1, done=2, total=3)


def test_reclaiming_returns_stale_gone_and_earlier_own_claims_only(tmp_path: Path) -> None:
    """Claims of a holder whose heartbeat is older than the stale time, or gone, or of an
    earlier attempt of our own worker go back to pending; our own and fresh ones stay."""
    paths = _paths(tmp_path)
    create_ledger(paths, list(range(6)), Holder("t-w0", 0))
    holders = {
        "own": Ledger(paths, Holder("t-w0", 1)),
        "earlier": Ledger(paths, Holder("t-w0", 0)),
        "fresh": Ledger(paths, Holder("t-w1", 0)),
        "at_limit": Ledger(paths, Holder("t-w2", 0)),
        "stale": Ledger(paths, Holder("t-w3", 0)),
        "gone": Ledger(paths, Holder("t-w4", 0)),
    }
    claimed = {}
    for key, ledger in holders.items():
        ledger.heartbeat()
        claimed[key] = ledger.claim()
    holders["gone"].remove_heartbeat()
    holders["gone"].remove_heartbeat()  # twice: no error
    _age(paths.heartbeats / "t-w3@0", 120)
    _age(paths.heartbeats / "t-w2@0", 30)

    returned = holders["own"].reclaim_stale(stale_s=60)

    assert sorted(returned) == sorted(
        [(claimed["earlier"], "t-w0@0"), (claimed["stale"], "t-w3@0"), (claimed["gone"], "t-w4@0")]
    )
    assert claims_by_worker(paths) == {"t-w0": 1, "t-w1": 1, "t-w2": 1}
    assert holders["own"].commit(claimed["own"]) and holders["fresh"].commit(claimed["fresh"])


def test_a_claim_skips_units_others_won_and_refills_once(tmp_path: Path) -> None:
    """A candidate another worker took is skipped for the next; when the candidates run
    out the pending units are listed again, once."""
    paths = _paths(tmp_path)
    create_ledger(paths, [0, 1, 2], Holder("t-w0", 0))
    slow, fast = Ledger(paths, Holder("t-w1", 0)), Ledger(paths, Holder("t-w2", 0))
    assert slow.refill() == 3
    taken = {fast.claim(), fast.claim()}
    left = slow.claim()
    assert left is not None and left not in taken
    assert slow.claim() is None
    assert fast.give_back([*taken]) == 2
    assert slow.claim() in taken


def test_claims_list_pending_once_until_their_candidates_run_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim takes the next candidate without listing `pending/` again (a listing of a
    large task's pending units is the costly read, on NFS most), a candidate another worker
    won included; only when none is left is it listed again."""
    paths = _paths(tmp_path)
    create_ledger(paths, [0, 1, 2, 3], Holder("t-w0", 0))
    slow, fast = Ledger(paths, Holder("t-w1", 0)), Ledger(paths, Holder("t-w2", 0))
    listed: list[Path] = []
    real = ledger_module.unit_bits

    def counted(path: Path, skip: AbstractSet[str]) -> tuple[bytearray, int, int]:
        listed.append(path)
        return real(path, skip)

    monkeypatch.setattr(ledger_module, "unit_bits", counted)

    assert slow.refill() == 4
    taken = fast.claim()
    mine = {slow.claim(), slow.claim(), slow.claim()}

    assert taken not in mine and None not in mine
    assert listed == [paths.pending, paths.pending]  # slow's refill, fast's first claim
    assert slow.claim() is None
    assert listed == [paths.pending] * 3


def test_a_fresh_holder_has_no_candidates_left_until_it_lists_pending(tmp_path: Path) -> None:
    """The worker sizes its first batches by `candidates_left` before its first claim."""
    paths = _paths(tmp_path)
    create_ledger(paths, [0, 1, 2], Holder("t-w0", 0))
    ledger = Ledger(paths, Holder("t-w0", 0))

    assert ledger.candidates_left() == 0
    assert ledger.claim() is not None and ledger.candidates_left() == 2


def test_holders_listing_together_start_at_places_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Holders that listed the same pending units each start from a place of their own among
    them (from their token), so their first claims do not race for the same unit."""
    paths = _paths(tmp_path)
    create_ledger(paths, list(range(100)), Holder("t-w0", 0))
    holders = [Ledger(paths, Holder(f"t-w{n}", 0)) for n in range(1, 17)]
    for holder in holders:
        holder.refill()
    lost: list[str] = []
    real = os.rename

    def rename(source: str, target: str) -> None:
        try:
            real(source, target)
        except FileNotFoundError:
            lost.append(source)
            raise

    monkeypatch.setattr(ledger_module.os, "rename", rename)

    assert len({holder.claim() for holder in holders}) == len(holders)
    assert lost == []


def test_a_directory_of_units_is_read_as_a_bit_per_unit_index(tmp_path: Path) -> None:
    """`unit_bits`: the units named in a directory (other names and those skipped left out),
    how many, and the width of their names' digits."""
    (tmp_path / "units").mkdir()
    for name in ("u000001", "u000009", "u123456", "u654321", "u000012.tmp", "x000002"):
        (tmp_path / "units" / name).touch()

    bits, found, width = ledger_module.unit_bits(tmp_path / "units", {"u654321"})

    assert (found, width) == (3, 6)
    assert [i for i in range(len(bits) * 8) if bits[i >> 3] >> (i & 7) & 1] == [1, 9, 123456]
    assert ledger_module.unit_bits(tmp_path / "none") == (bytearray(), 0, 0)


@pytest.mark.parametrize("worker", [f"t-w{n}" for n in range(1, 9)])
def test_a_holder_claims_every_pending_unit_once_in_unit_order_from_its_place(
    tmp_path: Path, worker: str
) -> None:
    """Whatever its place, a holder claims each pending unit once, in unit order from there
    round to where it began; units done meanwhile (gaps of whole bytes among them) skipped."""
    paths = _paths(tmp_path)
    create_ledger(paths, list(range(100)), Holder("t-w0", 0))
    names = unit_names(100)
    for name in names[:10] + names[50:67]:
        os.rename(paths.pending / name, paths.done / name)
    pending = names[10:50] + names[67:]
    holder = Ledger(paths, Holder(worker, 0))

    claims = list(iter(holder.claim, None))

    place = zlib.crc32(Holder(worker, 0).token.encode()) % 100  # among units 0 to 99
    start = next((name for name in pending if unit_index(name) >= place), pending[0])
    assert claims == pending[pending.index(start) :] + pending[: pending.index(start)]
    assert holder.candidates_left() == 0 and holder.done_count() == 27


@pytest.mark.parametrize("total", [8, 16])
def test_a_unit_at_the_last_bit_of_the_listing_is_claimed_and_the_next_look_wraps(
    tmp_path: Path, total: int
) -> None:
    """Units filling whole bytes of bits: the highest is claimed, and the look after it
    starts again from the lowest rather than past the end."""
    paths = _paths(tmp_path)
    create_ledger(paths, list(range(total)), Holder("t-w0", 0))
    holder = Ledger(paths, Holder("t-w1", 0))

    assert sorted(n for n in iter(holder.claim, None) if n) == unit_names(total)


def test_giving_back_a_claim_no_longer_held_still_returns_the_others(tmp_path: Path) -> None:
    """A claim taken from us meanwhile (reclaimed as stale) is skipped, not the end: the
    claims after it go back to pending."""
    paths = _paths(tmp_path)
    create_ledger(paths, [0, 1, 2], Holder("t-w0", 0))
    ledger = Ledger(paths, Holder("t-w0", 0))
    first, second = ledger.claim(), ledger.claim()
    assert first and second and ledger.commit(first)

    assert ledger.give_back([first, second]) == 1

    assert counts(paths) == LedgerCounts(pending=2, claimed=0, done=1, total=3)


def test_the_last_resort_passes_over_pending_units_that_are_not_marked(tmp_path: Path) -> None:
    """Units pending without a mark (given back since the coordinator last listed) do not
    stop the last resort from taking the one its earlier attempt marked."""
    paths = _paths(tmp_path)
    create_ledger(paths, [0, 1, 2], Holder("t-w0", 0))
    earlier = Ledger(paths, Holder("t-w0", 0), memory_per_worker_gb=1.0)
    assert sorted(str(earlier.claim()) for _ in range(3)) == unit_names(3)
    marked = unit_names(3)[-1]  # the others come first in the last resort's order
    earlier.mark_memory_kill(marked, memory_per_worker_gb=1.0, memory_limit_gb=2.0)
    earlier.give_back(unit_names(3))
    retry = Ledger(paths, Holder("t-w0", 1), memory_per_worker_gb=1.0)

    assert retry.claim_memory_killed(older_than_s=60) == marked


@pytest.mark.parametrize("total", [0, 1, 7, 1_000_000, 1_000_001])
def test_unit_names_named_at_each_look_are_the_ledger_s_names(total: int) -> None:
    """What the service reads a million units by: the names the ledger gives them, in order."""
    names = UnitNames(total)
    if total <= 7:
        assert list(names) == unit_names(total)
    else:
        whole = unit_names(total)
        assert len(names) == total
        assert [names[0], names[-1], names[total // 2]] == [whole[0], whole[-1], whole[total // 2]]
        assert names[10:13] == whole[10:13]
    with pytest.raises(IndexError):
        names[total]


def test_listing_the_pending_units_of_a_large_task_holds_a_bit_a_unit(tmp_path: Path) -> None:
    """A claimer's listing of 100,000 pending units is streamed into a bit per unit: it
    allocates well under a byte a unit, not a list of 100,000 names (80 bytes a unit: 80 MB
    in each claiming process of a task of 10^6 units)."""
    total = 100_000
    paths = _paths(tmp_path)
    create_ledger(paths, [None] * total, Holder("t-w0", 0))
    ledger = Ledger(paths, Holder("t-w1", 0))

    tracemalloc.start()
    try:
        assert ledger.refill() == total
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert peak < total // 2, f"{peak / total:.1f} bytes a unit"
    claimed = [ledger.claim() for _ in range(3)]
    assert len(set(claimed)) == 3 and all(name in unit_names(total) for name in claimed)

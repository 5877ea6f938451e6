"""The ledger of a split task: which units are pending, claimed by whom, and done.

Every unit is one empty file that lives in exactly one of three directories; it only ever
moves by `rename`, which is atomic on a POSIX file system (local disk, NFS v4.1+ whose
sessions make a retried rename exactly-once). So exactly one worker wins a claim, a unit is
never in two states, and nothing needs a lock:

    ledger/meta.json                 {"total": n, ...}, written before the ledger appears
    ledger/units.json                the unit values, in unit order
    ledger/pending/u000042           waiting for a worker
    ledger/claimed/u000042@w1@0      claimed by worker w1, attempt 0 (the holder)
    ledger/done/u000042              its output is in units/u000042
    ledger/heartbeats/w1@0           the holder's heartbeat: the file's mtime
    ledger/memory_kills/u000042      {"memory_per_worker_gb": ...}: the unit broke a pool

The coordinator builds the whole ledger in a temporary directory and renames it into place,
so a ledger that exists is complete (`ledger_creation.py`; `ledger_reads.py` reads it for the
workers, the merge and the service). A claim whose holder's heartbeat is older than the stale
time goes back to pending; its holder, should it come back, fails to move it to done and so
cannot count its unit a second time. Times are compared on the file server's clock:
"now" is the mtime of the coordinator's own heartbeat, touched just before.

A unit whose process was killed for memory is marked (`memory_kills/`, written before its
claim goes back to pending) with the memory per worker of the attempt it broke. Only an
attempt with more memory per worker (the retry memory after a kill) claims it again, so it
does not kill every pod at first memory in turn. So that a task always finishes, the
coordinator takes a marked unit itself as a last resort: when nothing else is pending or
claimed by anyone, and it marked the unit itself in an earlier attempt or the mark is older
than the stale time (no retry attempt took it).
"""

from __future__ import annotations

import os
import re
import shutil
import zlib
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

from simrun_harness.layout import TaskPaths
from simrun_harness.memory_kills import MemoryKill, read_memory_kills, write_memory_kill

SEP = "@"
META_FILE = "meta.json"
UNITS_FILE = "units.json"


@dataclass(frozen=True)
class Holder:
    """Who holds a claim: a worker in one attempt (a retried pod is a new holder)."""

    worker: str
    attempt: int

    @property
    def token(self) -> str:
        return f"{self.worker}{SEP}{self.attempt}"

    @classmethod
    def parse(cls, token: str) -> Holder | None:
        worker, _, attempt = token.rpartition(SEP)
        if not worker or not attempt.isdigit():
            return None
        return cls(worker, int(attempt))


def unit_names(total: int) -> list[str]:
    """The names of `total` units: u000000, u000001 ... (wider when there are more)."""
    width = max(6, len(str(max(total - 1, 0))))
    return [f"u{i:0{width}d}" for i in range(total)]


def unit_index(name: str) -> int:
    """The position of a unit in unit order, from its name."""
    return int(name[1:])


def partial_unit(entry: str) -> tuple[str, str] | None:
    """(unit, holder token) of a half-written unit output `.<unit>.<token>.<pid>`, else None."""
    if not entry.startswith("."):
        return None
    name, dot, rest = entry[1:].partition(".")
    token, dot2, pid = rest.rpartition(".")
    if not (dot and dot2 and name and token and pid.isdigit()):
        return None
    return name, token


def listing(path: Path) -> list[str]:
    """Names in a directory, by listing it (a listing revalidates a directory on NFS)."""
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []


def unit_bits(path: Path, skip: AbstractSet[str] = frozenset()) -> tuple[bytearray, int, int]:
    """The units named in the directory `path` (pending/, done/) but those in `skip`,
    streamed into a bit per unit index (10^6 units: 125 KB, not a list of 10^6 names); with
    how many there are and the width of their names' digits (0 when none)."""
    bits = bytearray()
    found = width = 0
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                name = entry.name
                if name in skip or not _UNIT_NAME.fullmatch(name):
                    continue
                index, byte = int(name[1:]), int(name[1:]) >> 3
                if byte >= len(bits):
                    bits.extend(bytes(max(byte + 1 - len(bits), len(bits))))
                if not bits[byte] >> (index & 7) & 1:
                    bits[byte] |= 1 << (index & 7)
                    found += 1
                    width = len(name) - 1
    except FileNotFoundError:
        pass
    return bits, found, width


_UNIT_NAME = re.compile(r"u[0-9]{1,12}")
_SET_BYTE = re.compile(rb"[^\x00]")


def ledger_exists(paths: TaskPaths) -> bool:
    """Whether the ledger exists, by listing the task directory (no cached negative lookup)."""
    return paths.ledger.name in listing(paths.root)


class Ledger:
    """One holder's view of the ledger: claim, commit, give back, heartbeat, reclaim."""

    def __init__(
        self, paths: TaskPaths, holder: Holder, memory_per_worker_gb: float | None = None
    ) -> None:
        self.paths = paths
        self.holder = holder
        self.memory_per_worker_gb = memory_per_worker_gb
        self._heartbeat = paths.heartbeats / holder.token
        # the pending units of our last listing not tried yet: a bit per unit index, how
        # many are set, where the next is looked for (from a place of our own: less contention)
        self._candidates = bytearray()
        self._left = 0
        self._cursor = 0
        self._width = 6
        self._offset = zlib.crc32(holder.token.encode())
        # plain strings on the hot path: a claim and a commit are a rename each, no more
        self._pending = str(paths.pending) + os.sep
        self._done = str(paths.done) + os.sep
        self._claimed = str(paths.claimed) + os.sep
        self._suffix = SEP + holder.token

    def _claim_path(self, name: str) -> str:
        return self._claimed + name + self._suffix

    def heartbeat(self) -> float:
        """Touch the heartbeat; returns its mtime, the file server's "now"."""
        try:
            os.utime(self._heartbeat, None)
        except FileNotFoundError:
            self._heartbeat.touch()
        return self._heartbeat.stat().st_mtime

    def remove_heartbeat(self) -> None:
        self._heartbeat.unlink(missing_ok=True)

    def refill(self) -> int:
        """List pending units as candidates, starting at a place of our own (less contention).

        Units marked killed for memory at our memory per worker or more are not candidates.
        The directory is streamed, each unit kept as a bit: a listing of a large task holds
        a few bytes, whatever its number of units."""
        kills = self.memory_kills()
        blocked = {name for name, kill in kills.items() if not self._may_claim(kill)}
        self._candidates, self._left, width = unit_bits(self.paths.pending, blocked)
        self._width = width or self._width
        # our place among the units up to the highest listed (the bits past it are spare)
        listed = self._candidates.rstrip(b"\x00")
        span = (len(listed) - 1) * 8 + listed[-1].bit_length() if listed else 1
        self._cursor = self._offset % span
        return self._left

    def candidates_left(self) -> int:
        """Units of our last listing of pending not tried yet: what is left, as far as we know."""
        return self._left

    def _next_candidate(self) -> str | None:
        """The name of the next candidate from the cursor on (wrapping once), taken off;
        None when no bit is left."""
        bits, position, wrapped = self._candidates, self._cursor, False
        while True:
            byte = position >> 3
            if byte < len(bits) and (value := bits[byte] >> (position & 7)):
                position += (value & -value).bit_length() - 1
                bits[position >> 3] &= ~(1 << (position & 7))
                self._cursor, self._left = position + 1, self._left - 1
                return f"u{position:0{self._width}d}"
            found = _SET_BYTE.search(bits, byte + 1)
            if found is None and wrapped:
                self._left = 0
                return None
            wrapped = wrapped or found is None
            position = found.start() * 8 if found else 0

    def claim(self) -> str | None:
        """Claim one pending unit by renaming it to our name; None when none is left."""
        for listed in (False, True):
            if listed and not self.refill():
                return None
            while self._left and (name := self._next_candidate()) is not None:
                try:
                    os.rename(self._pending + name, self._claim_path(name))
                except FileNotFoundError:
                    continue  # another worker won it
                return name
        return None

    def memory_kills(self) -> dict[str, MemoryKill]:
        """The units marked killed for memory, with the memory of the attempt they broke."""
        return read_memory_kills(self.paths)

    def _may_claim(self, kill: MemoryKill) -> bool:
        own = self.memory_per_worker_gb
        return own is not None and own > kill.memory_per_worker_gb + 1e-9

    def mark_memory_kill(
        self, name: str, *, memory_per_worker_gb: float, memory_limit_gb: float | None
    ) -> None:
        """Mark `name` as having broken a pool at this memory (the highest such memory wins).

        Called before its claim goes back to pending, so no attempt at that memory claims it
        in between. The mark is written to a temporary name and renamed into place.
        """
        kill = MemoryKill(memory_per_worker_gb, memory_limit_gb, self.holder.token)
        write_memory_kill(self.paths, name, kill)

    def claim_memory_killed(self, older_than_s: float) -> str | None:
        """The last resort of the coordinator: claim a marked unit whatever our memory.

        Only when no unit is claimed by anyone, and the pending unit was marked by an earlier
        attempt of our own worker (we are its retry, back at first memory after a preemption)
        or its mark is older than `older_than_s` on the file server's clock (the retry of the
        pod it broke did not take it).
        """
        if listing(self.paths.claimed):
            return None
        kills = self.memory_kills()
        now = self.heartbeat()
        for name in sorted(set(listing(self.paths.pending)) & set(kills)):
            holder = Holder.parse(kills[name].holder)
            if holder is None or holder.worker != self.holder.worker:
                try:
                    marked_at = (self.paths.memory_kills / name).stat().st_mtime
                except FileNotFoundError:
                    continue
                if now - marked_at <= older_than_s:
                    continue
            try:
                os.rename(self._pending + name, self._claim_path(name))
            except FileNotFoundError:
                continue
            return name
        return None

    def commit(self, name: str) -> bool:
        """Mark a claimed unit done; False if the claim was taken from us meanwhile."""
        try:
            os.rename(self._claim_path(name), self._done + name)
        except FileNotFoundError:
            return False
        return True

    def give_back(self, names: Sequence[str]) -> int:
        """Return our claims to pending; returns how many we still held."""
        returned = 0
        for name in names:
            try:
                os.rename(self._claim_path(name), self._pending + name)
            except FileNotFoundError:
                continue
            returned += 1
        return returned

    def reclaim_stale(self, stale_s: float) -> list[tuple[str, str]]:
        """Return to pending the claims of holders that stopped heartbeating.

        A holder is stale when its heartbeat is older than `stale_s` (or gone), or when it is
        an earlier attempt of our own worker (that pod is over). Returns (unit, holder) pairs.
        """
        now = self.heartbeat()
        beats: dict[str, float] = {}
        with os.scandir(self.paths.heartbeats) as entries:
            for entry in entries:
                try:
                    beats[entry.name] = entry.stat().st_mtime
                except FileNotFoundError:
                    continue
        returned: list[tuple[str, str]] = []
        for entry_name in listing(self.paths.claimed):
            name, _, token = entry_name.partition(SEP)
            if token == self.holder.token:
                continue
            holder = Holder.parse(token)
            earlier_self = (
                holder is not None
                and holder.worker == self.holder.worker
                and holder.attempt < self.holder.attempt
            )
            beat = beats.get(token)
            if not earlier_self and beat is not None and now - beat <= stale_s:
                continue
            try:
                os.rename(self.paths.claimed / entry_name, self.paths.pending / name)
            except FileNotFoundError:
                continue  # committed or returned meanwhile
            returned.append((name, token))
        return returned

    def sweep_partials(self, stale_s: float) -> list[str]:
        """Remove the half-written unit outputs of holders that are gone; the names removed.

        A holder computes a unit into `units/.<unit>.<holder>.<pid>` and renames it into place;
        one killed half way leaves that directory behind. It is removed once its unit is done
        (by whoever took the claim back) and its holder is gone: its heartbeat older than
        `stale_s` or removed, or an earlier attempt of our own worker. A holder only late
        (frozen, then woken) that finds its directory gone while its unit is done counts the
        unit as a duplicate (`pool.JobRunner`), as it would had it finished first.
        """
        now = self.heartbeat()
        removed: list[str] = []
        for entry in listing(self.paths.units):
            parsed = partial_unit(entry)
            if parsed is None or parsed[1] == self.holder.token:
                continue
            name, token = parsed
            if not os.path.exists(self._done + name) or self._alive(token, now, stale_s):
                continue
            shutil.rmtree(self.paths.units / entry, ignore_errors=True)
            removed.append(entry)
        return removed

    def _alive(self, token: str, now: float, stale_s: float) -> bool:
        """Whether the holder `token` may still be writing: heartbeating, not our past self."""
        holder = Holder.parse(token)
        if holder and holder.worker == self.holder.worker and holder.attempt < self.holder.attempt:
            return False
        try:
            beat = (self.paths.heartbeats / token).stat().st_mtime
        except FileNotFoundError:
            return False
        return now - beat <= stale_s

    def return_earlier_attempts(self) -> list[tuple[str, str]]:
        """Return the claims our worker left in earlier attempts (that pod has ended)."""
        returned: list[tuple[str, str]] = []
        for entry_name in listing(self.paths.claimed):
            name, _, token = entry_name.partition(SEP)
            holder = Holder.parse(token)
            if (
                holder is not None
                and holder.worker == self.holder.worker
                and holder.attempt < self.holder.attempt
            ):
                try:
                    os.rename(self.paths.claimed / entry_name, self.paths.pending / name)
                except FileNotFoundError:
                    continue
                returned.append((name, token))
        return returned

    def done_count(self) -> int:
        """Units done, counted as the directory streams (no list of their names)."""
        try:
            with os.scandir(self.paths.done) as entries:
                return sum(1 for _ in entries)
        except FileNotFoundError:
            return 0

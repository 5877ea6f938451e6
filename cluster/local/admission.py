"""Which waiting pods start on the machine now, and which running ones must make room.

One pure function over plain values, called by the backend under the node's lock. Pods are
taken highest priority first, then in the order their runs were submitted and their place in
the run. A pod that fits the free cores and memory starts. One that does not keeps what is
free for itself (no lower pod starts in front of it) and, when extra workers of a lower
priority are running, evicts as few of them as make it fit — the way Kueue preempts lower
priorities. A node reserved for a run starts no other run's pod and evicts those running.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

Key = tuple[str, str]  # (run id, pod name)


@dataclass(frozen=True)
class Demand:
    """A pod waiting to start its next attempt."""

    key: Key
    priority: int
    cores: float
    memory_gb: float
    order: tuple[float, int]  # (its run's submission time, its index in the run)


@dataclass(frozen=True)
class Holding:
    """A running attempt: what it holds, and whether it is already asked to stop."""

    key: Key
    priority: int
    cores: float
    memory_gb: float
    extra: bool
    started: float
    evicting: bool = False


@dataclass(frozen=True)
class Decision:
    start: tuple[Key, ...] = ()
    evict: tuple[tuple[Key, str], ...] = ()


@dataclass
class _Pool:
    cores: float
    memory_gb: float

    def covers(self, cores: float, memory_gb: float) -> bool:
        return self.cores >= cores - 1e-9 and self.memory_gb >= memory_gb - 1e-9

    def take(self, cores: float, memory_gb: float) -> tuple[float, float]:
        """Take up to the amounts; what could not be taken."""
        got_c, got_m = min(max(self.cores, 0.0), cores), min(max(self.memory_gb, 0.0), memory_gb)
        self.cores -= got_c
        self.memory_gb -= got_m
        return cores - got_c, memory_gb - got_m


def admit(
    cores: float,
    memory_gb: float,
    demands: Sequence[Demand],
    holdings: Sequence[Holding],
    reserved_by: str | None = None,
) -> Decision:
    """What to start and whom to evict (with why) on a node of `cores` and `memory_gb`."""
    evict: list[tuple[Key, str]] = []
    evicting = [h for h in holdings if h.evicting]
    if reserved_by is not None:
        for h in holdings:
            if h.key[0] != reserved_by and not h.evicting:
                evict.append((h.key, f"the node is reserved for run {reserved_by}"))
                evicting.append(h)
    leaving = {h.key for h in evicting}
    free = _Pool(
        cores - sum(h.cores for h in holdings), memory_gb - sum(h.memory_gb for h in holdings)
    )
    incoming = _Pool(sum(h.cores for h in evicting), sum(h.memory_gb for h in evicting))
    victims = sorted(
        (h for h in holdings if h.extra and h.key not in leaving),
        key=lambda h: (h.priority, -h.started),
    )
    start: list[Key] = []
    for d in sorted(demands, key=lambda d: (-d.priority, d.order)):
        if reserved_by is not None and d.key[0] != reserved_by:
            continue
        if d.cores > cores + 1e-9 or d.memory_gb > memory_gb + 1e-9:
            continue  # never fits this node: it waits, holding nothing back
        if free.covers(d.cores, d.memory_gb):
            free.take(d.cores, d.memory_gb)
            start.append(d.key)
            continue
        short_c, short_m = free.take(d.cores, d.memory_gb)
        short_c, short_m = incoming.take(short_c, short_m)
        chosen: list[Holding] = []
        got = _Pool(0.0, 0.0)
        for h in victims:
            if got.covers(short_c, short_m):
                break
            if h.priority < d.priority:
                chosen.append(h)
                got.cores += h.cores
                got.memory_gb += h.memory_gb
        if chosen and got.covers(short_c, short_m):
            for h in chosen:
                victims.remove(h)
                evict.append((h.key, f"preempted by {d.key[1]} of run {d.key[0]}"))
            incoming.cores += got.cores - short_c
            incoming.memory_gb += got.memory_gb - short_m
    return Decision(tuple(start), tuple(evict))


def priority_lookup(
    source: Callable[[str], int] | Mapping[str, int] | None,
) -> Callable[[str], int]:
    """A class name's priority value; 0 for a name the source does not know."""
    if source is None:
        from runs.priorities import value_of

        source = value_of
    if isinstance(source, Mapping):
        values = source
        return lambda name: int(values.get(name, 0))
    lookup = source

    def value(name: str) -> int:
        try:
            return int(lookup(name))
        except KeyError:
            return 0

    return value

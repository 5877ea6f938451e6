"""How a worker feeds its pool: units queued per process, and how long results may wait.

Plain functions of numbers (the worker's loop applies them), so the rules are tested with
plain values. Short units go out in batches of claims (one message per batch) and their
results are read in batches too: the worker sleeps until a process runs low and rings, not
once per unit (each wake of the worker's main process takes a core from a unit a moment).
"""

from __future__ import annotations

from collections.abc import Iterable

QUEUE_S = 0.25
"""Seconds of work queued per process beyond its running unit, once unit times are known:
short units never wait for the worker's round trip (nor for it to be scheduled on a busy
machine); units of QUEUE_S or more get nothing queued, so no claim waits behind a long unit."""
MAX_QUEUED = 32
LINGER_MAX_S = QUEUE_S
"""Results wait at most this long unread: the progress file moves on at least this often."""


def queue_depth(mean_s: float | None, *, left: int, processes: int) -> tuple[int, int]:
    """(refill below, fill up to): units a process holds, the running one included.

    Up to the running unit plus QUEUE_S of queued work once unit times are known (one unit
    before), topped up once it falls below half of that, so short units are claimed and sent
    in batches; never more than a fair share of the `left` pending units we know of, so no
    process idles at the end while another works through its queue.
    """
    depth = 1 if mean_s is None else 1 + min(MAX_QUEUED, int(QUEUE_S / max(mean_s, 1e-6)))
    depth = min(depth, 1 + left // max(1, processes))
    return max(1, (depth + 1) // 2), depth


def ring_at(low: int) -> int | None:
    """Jobs left in a batch at which its process rings the worker: below `low`, where the
    worker tops it up. None (no ring) while the worker reads each result at once anyway."""
    return low - 1 if low > 1 else None


def ring_to_come(held: int, ring_point: int | None) -> bool:
    """Whether a process holding `held` jobs will still ring: its last batch was sent to ring
    at `ring_point` jobs left (`ring_at`; None: never) and it holds more than that."""
    return ring_point is not None and held > ring_point


def wants_more(held: int, ring_point: int | None, *, low: int) -> bool:
    """Whether the worker tops up a process holding `held` jobs: below `low`, or once it has
    rung. The ring is its call for more whatever `low` is now: `low` moves with the units'
    mean time and with what is left, and a process that rang at the point its batch was sent
    with, above today's `low`, would otherwise run dry with nobody awake to feed it."""
    return held < low or (ring_point is not None and held <= ring_point)


def results_may_wait(queues: Iterable[tuple[int, int | None]], *, low: int) -> float:
    """Seconds the worker may leave its processes' results unread (0: read each at once).

    `queues`: (jobs held, where its last batch rings: `ring_at`) of each live process.
    Results may wait while every busy process holds at least `low` jobs and has a ring still
    to come (`ring_to_come`): the ring wakes the worker to top it up, with half its queue
    still there, whatever its units' times. Never longer than LINGER_MAX_S, so progress
    moves on; at once while there are no batches (`low` 1), once a process is low (the last
    units: the worker's part ends with them), or once a ring is spent (nothing else would
    wake the worker before that process runs dry).
    """
    held = [(n, point) for n, point in queues if n > 0]
    if low <= 1 or not held or any(n < low or not ring_to_come(n, p) for n, p in held):
        return 0.0
    return LINGER_MAX_S

"""Rate limits per token: an atomic counter per token and minute in Redis (429, Retry-After).

The counter in Redis counts the requests *granted* in the current one-minute window, over
every web process of the service. A process takes its grants in small batches (a lease): one
Lua script adds the batch to the counter, sets its expiry and returns the new total in one
round trip, and the process lets through as many requests as the total left room for before
it asks again. So most requests cost no round trip, and the total let through in a window
never exceeds the limit, whatever the number of processes. The price: a process may hold up
to one batch it has not used, so with P processes a token can be refused up to (P - 1) times a
batch before the limit; a batch is 1/50 of the limit (at most 20), so that is at
most 2 % of the limit per other process, and for limits under 100 a batch is one request:
exact counting.

Without `SIMRUN_REDIS_URL` (the embedded default has no Redis) the counter is local to the
process: the limit then holds per web process, which on one machine with one web process is
the same. If Redis cannot be reached the request is let through and a warning logged: rate
limiting protects the service, it must not take it down.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from functools import cache
from typing import Any

import redis
from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from runs.api.auth import Caller

log = logging.getLogger(__name__)

WINDOW_S = 60
KEY_PREFIX = "simrun:rate:"
MAX_BATCH = 20
_ADD = """
local count = redis.call('INCRBY', KEYS[1], ARGV[2])
if count == tonumber(ARGV[2]) then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return count
"""


def batch_size(limit: int) -> int:
    """How many grants a process takes from Redis at a time for this limit."""
    return max(1, min(MAX_BATCH, limit // 50))


class LocalCounter:
    """A process-local counter of hits per key and window (the fallback without Redis)."""

    def __init__(self) -> None:
        # Request threads hit at once: without it two hits read the same count and one is
        # lost, or a new window's clear lands between another thread's read and its write.
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._window = -1

    def hit(self, key: str, window: int, amount: int = 1) -> int:
        with self._lock:
            if window != self._window:
                self._counts.clear()
                self._window = window
            self._counts[key] = self._counts.get(key, 0) + amount
            return self._counts[key]


class Leases:
    """The grants this process holds, per key, for the current window."""

    def __init__(self) -> None:
        # Request threads take at once: without it two threads both see the last grant left
        # and both use it (one request more than the limit allows).
        self._lock = threading.Lock()
        self._left: dict[str, int] = {}
        self._window = -1

    def take(self, key: str, window: int) -> bool:
        """Use one grant held for `key`; False when none is left (ask Redis for more)."""
        with self._lock:
            if window != self._window:
                self._left.clear()
                self._window = window
            left = self._left.get(key, 0)
            if left <= 0:
                return False
            self._left[key] = left - 1
            return True

    def add(self, key: str, window: int, grants: int) -> None:
        with self._lock:
            if window == self._window:
                self._left[key] = self._left.get(key, 0) + grants


_local = LocalCounter()
_leases = Leases()


@cache
def _script(url: str) -> Any:
    client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
    return client.register_script(_ADD)


def _window(now: float | None) -> tuple[int, int]:
    now = time.time() if now is None else now
    window = int(now // WINDOW_S)
    return window, max(1, math.ceil((window + 1) * WINDOW_S - now))


def _key(token_hash: str, window: int) -> str:
    return f"{KEY_PREFIX}{token_hash[:32]}:{window}"


def hit(token_hash: str, *, amount: int = 1, now: float | None = None) -> tuple[int, int]:
    """Add `amount` requests of a token to its counter; (the window's total, seconds left)."""
    window, left = _window(now)
    key = _key(token_hash, window)
    url = settings.SIMRUN_REDIS_URL
    if not url:
        return _local.hit(key, window, amount), left
    try:
        return int(_script(url)(keys=[key], args=[WINDOW_S * 2, amount])), left
    except redis.RedisError as exc:
        log.warning("rate limit not counted, Redis is unavailable: %s", exc)
        return 0, left


def allow(token_hash: str, *, limit: int, now: float | None = None) -> tuple[bool, int]:
    """Whether one more request of this token fits its limit; (allowed, seconds left)."""
    window, left = _window(now)
    key = _key(token_hash, window)
    if _leases.take(key, window):
        return True, left
    batch = batch_size(limit)
    total, left = hit(token_hash, amount=batch, now=now)
    granted = max(0, min(batch, limit - (total - batch)))
    if granted > 1:
        _leases.add(key, window, granted - 1)
    return granted > 0, left


class TokenRateThrottle(BaseThrottle):
    """At most SIMRUN_RATE_LIMIT_PER_MINUTE requests per token per minute."""

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        caller = request.user
        if not isinstance(caller, Caller):
            return True  # anonymous requests are refused by authentication
        allowed, left = allow(caller.token_hash, limit=settings.SIMRUN_RATE_LIMIT_PER_MINUTE)
        if not allowed:
            self._wait = left
        return allowed

    def wait(self) -> float | None:
        return self._wait

"""Rate limits per token: an atomic counter per token and minute in Redis (429, Retry-After).

One Lua script increments the counter of the current one-minute window and sets its expiry in
the same round trip, so concurrent requests of one token, on any number of web processes,
are counted exactly. Without `SIMRUN_REDIS_URL` (the embedded default has no Redis) the
counter is local to the process: the limit then holds per web process, which on one machine
with one web process is the same. If Redis cannot be reached the request is let through and a
warning logged: rate limiting protects the service, it must not take it down.
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
_HIT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return count
"""


class LocalCounter:
    """A process-local counter of hits per key and window (the fallback without Redis)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._window = -1

    def hit(self, key: str, window: int) -> int:
        with self._lock:
            if window != self._window:
                self._counts.clear()
                self._window = window
            self._counts[key] = self._counts.get(key, 0) + 1
            return self._counts[key]


_local = LocalCounter()


@cache
def _script(url: str) -> Any:
    client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
    return client.register_script(_HIT)


def hit(token_hash: str, *, now: float | None = None) -> tuple[int, int]:
    """Count one request of a token; (requests in this window so far, seconds left in it)."""
    now = time.time() if now is None else now
    window = int(now // WINDOW_S)
    left = max(1, math.ceil((window + 1) * WINDOW_S - now))
    key = f"{KEY_PREFIX}{token_hash[:32]}:{window}"
    url = settings.SIMRUN_REDIS_URL
    if not url:
        return _local.hit(key, window), left
    try:
        return int(_script(url)(keys=[key], args=[WINDOW_S * 2])), left
    except redis.RedisError as exc:
        log.warning("rate limit not counted, Redis is unavailable: %s", exc)
        return 0, left


class TokenRateThrottle(BaseThrottle):
    """At most SIMRUN_RATE_LIMIT_PER_MINUTE requests per token per minute."""

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        caller = request.user
        if not isinstance(caller, Caller):
            return True  # anonymous requests are refused by authentication
        count, left = hit(caller.token_hash)
        if count > settings.SIMRUN_RATE_LIMIT_PER_MINUTE:
            self._wait = left
            return False
        return True

    def wait(self) -> float | None:
        return self._wait

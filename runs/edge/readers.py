"""Reads the event loop needs from the database or the store, on a few threads of their own.

The event loop must never block, and a stream must not hold a thread of its own while it
waits: every blocking read of the edge (a credential, a stream's poll) runs here, on at most
SIMRUN_WEB_READERS threads shared by every connection of the process, and gives its
database connection back (to the pool under the web process) when it is done, so an open
stream holds neither a thread nor a connection between its polls.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from django.conf import settings
from django.db import connection

P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()  # two event loops (tests) making the pool at once would make two
_pool: ThreadPoolExecutor | None = None


def pool() -> ThreadPoolExecutor:
    """The readers' threads of this process, made at the first read."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=int(settings.SIMRUN_WEB_READERS), thread_name_prefix="simrun-reader"
            )
        return _pool


def polled(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn`, then its connection given back: a stream polls for minutes; were its connection
    kept between polls, a few open streams would take every connection of the pool."""

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        finally:
            if not connection.in_atomic_block:  # never in the middle of a transaction
                connection.close()

    return call


async def read(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """`fn(*args, **kwargs)` on a reader thread; its connection given back afterwards."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(pool(), functools.partial(polled(fn), *args, **kwargs))

"""Database access from long streams without holding a connection between polls."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from django.db import connection

P = ParamSpec("P")
R = TypeVar("R")


def polled(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn`, then its connection given back (to the pool under ASGI).

    An event or log stream polls for minutes; were its connection kept between polls, a few
    open streams would take every connection of the web process's pool.
    """

    @wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        finally:
            if not connection.in_atomic_block:  # never in the middle of a transaction
                connection.close()

    return call

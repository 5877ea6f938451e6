"""The end of a log within a number of bytes: how an answer of many logs stays within
SIMRUN_LOG_ANSWER_MAX_BYTES (`runs.selectors.logs`).

The bytes of an answer are shared out among its logs (`shares`): a log shorter than an even
share is whole and leaves the rest to the others. Each log is then read from its end, at
most its share (`read_end`), so an answer never holds more than the cap, however many logs a
run's code wrote; the newest lines are the ones kept.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO


@dataclass(frozen=True)
class Window:
    """The last bytes of a log: where they start in it, and whether more was wanted (the log
    went on before `start`, or fewer than the lines asked for fit)."""

    data: bytes
    start: int
    short: bool


def shares(sizes: list[int], total: int) -> list[int]:
    """Each size's part of `total`: the smallest first, each at most an even share of what
    is left, so what a small one leaves goes to the larger ones."""
    parts = [0] * len(sizes)
    left = total
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    for place, index in enumerate(order):
        parts[index] = min(sizes[index], left // (len(sizes) - place))
        left -= parts[index]
    return parts


def from_line(data: bytes, start: int, whole_line: bool) -> Window:
    """`data`, read from `start` of a log, from its first whole line (unless `whole_line`:
    it begins one already, or the one line is all there is)."""
    if start > 0 and not whole_line:
        newline = data.find(b"\n")
        if 0 <= newline < len(data) - 1:
            data, start = data[newline + 1 :], start + newline + 1
    return Window(data, start, start > 0)


def last_lines(window: Window, lines: int | None) -> Window:
    """The last `lines` lines of a window; short when fewer fit in it than were asked for."""
    if lines is None:
        return window
    parts = window.data.splitlines(keepends=True)
    if len(parts) < lines:
        return window
    skipped = sum(len(p) for p in parts[: len(parts) - lines])
    return Window(window.data[skipped:], window.start + skipped, False)


def read_end(handle: BinaryIO, budget: int, lines: int | None) -> Window:
    """The last `budget` bytes of an open log (closed here) from its first whole line, or its
    last `lines` lines among them."""
    with handle:
        size = os.fstat(handle.fileno()).st_size
        start = max(0, size - budget)
        handle.seek(max(0, start - 1))
        data = handle.read(budget + 1 if start else budget)
    whole_line = start == 0 or data[:1] == b"\n"
    if start > 0:
        data = data[1:]
    return last_lines(from_line(data, start, whole_line), lines)


def text_end(text: str, budget: int) -> tuple[str, int]:
    """The end of a text already read (a backend's log) within `budget` bytes, from its first
    whole line, and the bytes left out before it."""
    data = text.encode()
    if len(data) <= budget:
        return text, 0
    start = len(data) - budget
    window = from_line(data[start:], start, data[start - 1 : start] == b"\n")
    return window.data.decode("utf-8", errors="replace"), window.start

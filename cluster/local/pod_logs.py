"""Reading the log of an attempt with a byte cap, optionally only its last lines."""

from __future__ import annotations

import os
from pathlib import Path

BLOCK = 64 * 1024


def _tail_bytes(path: Path, lines: int, limit: int) -> bytes:
    """The bytes of the last `lines` lines, reading backwards no more than needed."""
    with open(path, "rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        data = b""
        position = end
        while position > 0:
            step = min(BLOCK, position)
            position -= step
            handle.seek(position)
            data = handle.read(step) + data
            # one newline more than the lines wanted (a final newline ends the last line)
            if data.count(b"\n") > lines or len(data) > limit + BLOCK * 4:
                break
    if lines <= 0:
        return b""
    parts = data.splitlines(keepends=True)
    return b"".join(parts[-lines:])


def read_log(path: Path, tail_lines: int | None, limit: int) -> tuple[str, bool]:
    """The text of a log and whether it was cut at `limit` bytes.

    Without `tail_lines` the first `limit` bytes; with it, the first `limit` bytes of its
    last `tail_lines` lines.
    """
    if tail_lines is None:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    else:
        data = _tail_bytes(path, tail_lines, limit)
    truncated = len(data) > limit
    return data[:limit].decode("utf-8", errors="replace"), truncated

"""What a progress file's lines said, saved by the process that read them for the next one.

A web process reads a task's progress file once and keeps what it said (`progress_lines`);
a process that never read it (the first after a restart, another web process) read the
whole file again: 14 MB and over a second for 100,000 units. The process that read a file
now saves its summary (a few arrays, ~2 MB for 100,000 units) under `SIMRUN_VIEW_CACHE`, the
service's own directory, never a run's: the next process loads it in milliseconds and reads
only the lines appended since.

A saved summary names the file's device, inode and the offset it was read to; one that does
not match the file now (replaced, cut), or that is not whole and well formed, is ignored and
the file read from its start. At most `KEPT_FILES` summaries are kept, the oldest removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

MAGIC = b"simrun-unit-lines 1\n"
HEADER_MAX_BYTES = 4 << 20  # the workers' names are in it: 253 bytes each at most
MAX_UNITS = 10_000_000
MAX_WORKERS = 10_000
KEPT_FILES = 256
SAVE_EVERY = 1 << 20  # bytes of lines read since the last save that make a save worth it


@dataclass
class Saved:
    """What a progress file's lines said, to the offset they were read to (the fields of
    `progress_lines.UnitLines`)."""

    key: tuple[int, int]  # the file's device and inode
    offset: int
    peak_gb: float | None = None
    first_at: array = field(default_factory=lambda: array("d"))
    seconds: array = field(default_factory=lambda: array("d"))
    workers: dict[str, bytearray] = field(default_factory=dict)


def _place(name: str) -> Path:
    digest = hashlib.sha256(name.encode()).hexdigest()[:40]
    return Path(settings.SIMRUN_VIEW_CACHE) / f"{digest}.lines"


def save(name: str, lines: Saved) -> None:
    """Save what the lines of the progress file `name` said so far (a cache: a failure to
    write it is no one's concern)."""
    folder = Path(settings.SIMRUN_VIEW_CACHE)
    workers = list(lines.workers.items())
    header = {
        "key": list(lines.key),
        "offset": lines.offset,
        "peak_gb": lines.peak_gb,
        "units": len(lines.first_at),
        "workers": [[worker, len(bits)] for worker, bits in workers],
    }
    target = _place(name)
    temporary = target.with_name(f".{target.name}.{os.getpid()}")
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(temporary, "wb") as out:
            out.write(MAGIC + json.dumps(header, separators=(",", ":")).encode() + b"\n")
            out.write(lines.first_at.tobytes())
            out.write(lines.seconds.tobytes())
            for _, bits in workers:
                out.write(bits)
        os.replace(temporary, target)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
        return
    _trim(folder)


def load(name: str, key: tuple[int, int], size: int) -> Saved | None:
    """The summary saved of the progress file `name`, if it was saved of this very file
    (`key`: its device and inode) read no further than its `size`; else None."""
    try:
        data = _place(name).read_bytes()
    except OSError:
        return None
    if not data.startswith(MAGIC):
        return None
    end = data.find(b"\n", len(MAGIC), len(MAGIC) + HEADER_MAX_BYTES)
    if end < 0:
        return None
    try:
        header = json.loads(data[len(MAGIC) : end])
        found = _checked(header, key, size, len(data) - end - 1)
    except (ValueError, TypeError, KeyError):
        return None
    if found is None:
        return None
    units, workers = found
    at = end + 1
    saved = Saved(key=key, offset=header["offset"], peak_gb=header["peak_gb"])
    saved.first_at.frombytes(data[at : at + 8 * units])
    saved.seconds.frombytes(data[at + 8 * units : at + 16 * units])
    at += 16 * units
    for worker, length in workers:
        saved.workers[worker] = bytearray(data[at : at + length])
        at += length
    return saved


def _checked(
    header: object, key: tuple[int, int], size: int, body: int
) -> tuple[int, list[tuple[str, int]]] | None:
    """The units and workers of a saved header, if it is of this file and its body is whole."""
    if not isinstance(header, dict) or header["key"] != list(key):
        return None
    offset, units, peak = header["offset"], header["units"], header["peak_gb"]
    if not (isinstance(offset, int) and 0 <= offset <= size):
        return None
    if not (isinstance(units, int) and 0 <= units <= MAX_UNITS):
        return None
    if peak is not None and not isinstance(peak, int | float):
        return None
    workers = header["workers"]
    if not isinstance(workers, list) or len(workers) > MAX_WORKERS:
        return None
    named: list[tuple[str, int]] = []
    for worker, length in workers:
        if not (isinstance(worker, str) and isinstance(length, int)):
            return None
        if not 0 <= length <= units // 8 + 1:
            return None
        named.append((worker, length))
    if body != 16 * units + sum(length for _, length in named):
        return None
    return units, named


def _trim(folder: Path) -> None:
    """Remove the oldest summaries beyond `KEPT_FILES` (those of runs no one looks at)."""
    with contextlib.suppress(OSError):
        saved = [e for e in os.scandir(folder) if e.name.endswith(".lines")]
        if len(saved) <= KEPT_FILES:
            return
        saved.sort(key=lambda e: e.stat().st_mtime)
        for entry in saved[: len(saved) - KEPT_FILES]:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)

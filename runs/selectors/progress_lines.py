"""What a split task's progress lines say, for its views: read whole once, then only the lines
appended since.

A task of 100,000 units has a progress file of some 15 MB; its page and the API's workers
asked for the units each worker did, when each unit was first done and the highest peak of a
unit's process by parsing every line at every request (seconds). A web process now keeps, for
the few files it read last (`KEPT`), what their lines said so far in compact arrays (a bit per
unit and worker, a time and a duration per unit: ~2 MB for 100,000 units) and the offset it
read to; a request reads only what was appended since (none once the task has ended). A file
that was replaced (another inode) or cut is read again from its start. What a process read
it saves for the others (`progress_saved`): a process that never read the file starts from
there.

Units are named `u<index>` by the harness (`ledger.unit_names`); a line naming anything else,
or that cannot be parsed, is skipped, as `simrun_harness.progress` readers skip it.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import threading
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from runs.models import Task
from runs.selectors import progress_saved
from runs.store import task_paths
from simrun_harness import store_reads
from simrun_harness.progress import LINE_MAX_BYTES, UNIT_DONE

KEPT = 8  # files whose summary a process keeps (the runs people look at now)
CHUNK = 1 << 20


@dataclass
class UnitLines:
    """What the `unit_done` lines of one progress file said so far."""

    key: tuple[int, int] = (0, 0)  # the file's device and inode
    offset: int = 0  # bytes read, whole lines only
    workers: dict[str, bytearray] = field(default_factory=dict)  # a bit per unit it did
    first_at: array = field(default_factory=lambda: array("d"))  # by unit index; NaN: not yet
    seconds: array = field(default_factory=lambda: array("d"))  # of the first completion
    peak_gb: float | None = None  # the highest peak of a unit's process
    saved_offset: int = 0  # the offset of the summary last saved for other processes
    # what `done_stamps` and `median_seconds` derived, and at which offset: a view of a
    # finished 100,000-unit task derives them once, not at every request
    _derived: tuple[int, list[float], float | None] | None = field(default=None, repr=False)

    def units_by_worker(self) -> dict[str, int]:
        """How many distinct units each worker did (over its attempts)."""
        return {
            name: int.from_bytes(bits, "little").bit_count() for name, bits in self.workers.items()
        }

    def first_times(self) -> list[datetime]:
        """When each unit done was first done, in unit order."""
        return [datetime.fromtimestamp(t, UTC) for t in self.first_at if t == t]

    def unit_seconds(self) -> list[float]:
        """The seconds each unit done took, its first time."""
        return [s for t, s in zip(self.first_at, self.seconds, strict=True) if t == t and s == s]

    def done_stamps(self) -> list[float]:
        """When each unit done was first done (POSIX seconds), in time order."""
        return self._derive()[1]

    def median_seconds(self) -> float | None:
        """The median of the seconds each unit done took its first time; None if none said."""
        return self._derive()[2]

    def _derive(self) -> tuple[int, list[float], float | None]:
        derived = self._derived
        if derived is None or derived[0] != self.offset:
            stamps = sorted(t for t in self.first_at if t == t)
            seconds = self.unit_seconds()
            derived = (self.offset, stamps, statistics.median(seconds) if seconds else None)
            self._derived = derived
        return derived

    def _add(self, worker: str, index: int, at: float, seconds: float | None) -> None:
        bits = self.workers.setdefault(worker, bytearray())
        byte = index >> 3
        if byte >= len(bits):
            bits.extend(bytes(byte - len(bits) + 1))
        bits[byte] |= 1 << (index & 7)
        if index >= len(self.first_at):
            grow = index - len(self.first_at) + 1
            self.first_at.extend([math.nan] * grow)
            self.seconds.extend([math.nan] * grow)
        if not self.first_at[index] <= at:  # NaN (not yet) or later
            self.first_at[index] = at
            self.seconds[index] = math.nan if seconds is None else seconds

    def read(self, data: bytes) -> None:
        """Take the whole lines of `data` (what the file holds past `offset`).

        The lines the harness writes (`ProgressWriter.unit_done`, one shape) are taken by one
        pattern over the whole chunk; only a chunk holding a `unit_done` line of another shape
        is read line by line as JSON (taking a line twice changes nothing: a unit's bit, its
        first time and the highest peak are kept as they were)."""
        taken = 0
        workers: dict[bytes, str] = {}
        for found in _HARNESS_LINE.finditer(data):
            at, worker, index, seconds, peak = found.groups()
            try:
                when = datetime.fromisoformat(at.decode()).timestamp()
                took = None if seconds == b"null" else float(seconds)
                highest = None if peak == b"null" else float(peak)
            except ValueError:
                continue  # read again below, as JSON
            name = workers.get(worker) or workers.setdefault(worker, worker.decode())
            self._add(name, int(index), when, took)
            if highest is not None:
                self.peak_gb = max(self.peak_gb or 0.0, highest)
            taken += 1
        if data.count(_UNIT_DONE_QUOTED) != taken:
            self._read_as_json(data)

    def _read_as_json(self, data: bytes) -> None:
        for line in data.split(b"\n"):
            if _UNIT_DONE_QUOTED not in line:
                continue
            try:
                event = json.loads(line)
                if event.get("event") != UNIT_DONE:
                    continue
                unit, worker = event["unit"], event["worker"]
                index = int(unit[1:]) if isinstance(unit, str) and unit[:1] == "u" else -1
                if index < 0 or not isinstance(worker, str):
                    continue
                at = datetime.fromisoformat(event["time"]).timestamp()
                seconds = event.get("seconds")
                peak = event.get("peak_memory_gb")
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            self._add(worker, index, at, float(seconds) if _number(seconds) else None)
            if _number(peak):
                self.peak_gb = max(self.peak_gb or 0.0, float(peak))


_UNIT_DONE_QUOTED = b'"' + UNIT_DONE.encode() + b'"'
_NUMBER = rb"(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|null)"
_HARNESS_LINE = re.compile(  # a `unit_done` line as `ProgressWriter.unit_done` writes it
    rb'^\{"event":"' + UNIT_DONE.encode() + rb'","time":"([^"\\\n]{1,64})",'
    rb'"worker":"([^"\\\n]{1,253})","unit":"u([0-9]{1,9})",'
    rb'"seconds":' + _NUMBER + rb',"peak_memory_gb":' + _NUMBER + rb"\}$",
    re.MULTILINE,
)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_SUMMARIES: OrderedDict[str, UnitLines] = OrderedDict()
_LOCK = threading.Lock()  # requests of one web process read the same file on several threads


def unit_lines(task: Task) -> UnitLines:
    """What the task's progress lines say now: the lines appended since this process last
    read the file, added to what it kept (no link followed: `store_reads`)."""
    name = str(task_paths(task.run_id, task.task_id).progress)
    with _LOCK:
        kept = _read(task, _SUMMARIES.pop(name, None), save_after=progress_saved.SAVE_EVERY)
        if kept is None:
            return UnitLines()
        _SUMMARIES[name] = kept
        while len(_SUMMARIES) > KEPT:
            _SUMMARIES.popitem(last=False)
        return kept


def save_for_views(task: Task) -> None:
    """Read an ended task's progress lines to their end and save what they say, so that
    the first view of it in any process of the service starts from there (nothing is
    appended to them any more); the summary itself is not kept in this process."""
    name = str(task_paths(task.run_id, task.task_id).progress)
    with _LOCK:
        _read(task, _SUMMARIES.get(name), save_after=1)


def _read(task: Task, kept: UnitLines | None, *, save_after: int) -> UnitLines | None:
    """`kept` (or the summary another process saved, or nothing) with the lines appended
    since it was read; saved for the other processes once `save_after` bytes were read
    since the last save. None when the task has no progress file."""
    paths = task_paths(task.run_id, task.task_id)
    name = str(paths.progress)
    try:
        handle = store_reads.open_file(paths.store_root, paths.progress)
    except FileNotFoundError:
        return None
    with handle:
        stat = os.fstat(handle.fileno())
        key = (stat.st_dev, stat.st_ino)
        if kept is None:  # another process may have read it and saved what it found
            kept = _from_saved(progress_saved.load(name, key, stat.st_size))
        if kept is None or kept.key != key or stat.st_size < kept.offset:
            kept = UnitLines(key=key)
        handle.seek(kept.offset)
        while chunk := handle.read(CHUNK):
            end = chunk.rfind(b"\n") + 1
            if end == 0:  # no whole line in a chunk: a line longer than any we write
                if len(chunk) > LINE_MAX_BYTES:
                    kept.offset += len(chunk)
                    continue
                break
            kept.read(chunk[:end])
            kept.offset += end
            if end < len(chunk):
                handle.seek(kept.offset)
    if kept.offset - kept.saved_offset >= save_after and kept.offset >= progress_saved.SAVE_EVERY:
        progress_saved.save(name, _to_saved(kept))
        kept.saved_offset = kept.offset
    return kept


def _to_saved(lines: UnitLines) -> progress_saved.Saved:
    return progress_saved.Saved(
        key=lines.key,
        offset=lines.offset,
        peak_gb=lines.peak_gb,
        first_at=lines.first_at,
        seconds=lines.seconds,
        workers=lines.workers,
    )


def _from_saved(saved: progress_saved.Saved | None) -> UnitLines | None:
    if saved is None:
        return None
    return UnitLines(
        key=saved.key,
        offset=saved.offset,
        workers=saved.workers,
        first_at=saved.first_at,
        seconds=saved.seconds,
        peak_gb=saved.peak_gb,
        saved_offset=saved.offset,
    )

"""The output files of a run's tasks (S10) and the byte ranges a download may ask for.

Paths are relative to the run store (`runs/<run>/tasks/<task>/out/...`), the same for every
client that mounts the store. Only regular files inside a task's `out/` are listed or served,
each reached without following a link (`simrun_harness.store_reads`): a run whose code
replaced its `out/` or a file in it with a link, a FIFO or a device shows nothing there and
serves nothing from outside the store. A listing is bounded in entries, depth and time
(SIMRUN_LISTING_*) and says when it was cut.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import BinaryIO

from runs.store import listing_limits, store_root
from simrun_harness import store_reads, store_walks
from simrun_harness.layout import MERGE_MARKER, check_name

MAX_LISTED = 5_000
"""The most files a listing holds (a page shows fewer); beyond, it is cut (`files`)."""
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class OutputNotFound(LookupError):
    """No such output file of this run."""


class RangeNotSatisfiable(ValueError):
    """A Range header that selects no byte of the file."""


@dataclass(frozen=True)
class OutputFile:
    path: str
    task: str
    size: int
    modified: datetime


@dataclass(frozen=True)
class OutputListing:
    files: list[OutputFile]
    truncated: bool
    cut: str | None = None
    """Why the listing stopped early: "files" (the most it lists), "entries", "depth" or
    "time" (SIMRUN_LISTING_MAX_ENTRIES, _DEPTH, _S); None when it is whole."""


def _task_ids(run_id: str, task_id: str | None) -> list[str]:
    if task_id:
        return [task_id]
    try:
        found = store_reads.names(store_root(), f"runs/{run_id}/tasks")
    except FileNotFoundError:
        return []
    valid = []
    for name in sorted(found):
        try:
            valid.append(check_name(name, what="task id"))
        except ValueError:
            continue
    return valid


def run_outputs(
    run_id: str, task_id: str | None = None, limit: int = MAX_LISTED, seconds: float | None = None
) -> OutputListing:
    """The files of the outputs of a run's tasks (of one task when given), sorted by path;
    looking for `seconds` at most when given (less than SIMRUN_LISTING_MAX_S)."""
    root = store_root()
    limits = listing_limits(files=limit)
    if seconds is not None:
        limits = replace(limits, seconds=min(limits.seconds, seconds))
    deadline = time.monotonic() + limits.seconds
    files: list[OutputFile] = []
    cut = None
    seen = 0
    for tid in _task_ids(run_id, task_id):
        out = f"runs/{run_id}/tasks/{tid}/out"
        remaining = replace(
            limits,
            files=limit - len(files),
            entries=max(0, limits.entries - seen),
            seconds=deadline - time.monotonic(),
        )
        walk = store_walks.walk_files(root, out, remaining)
        seen += walk.seen
        files += [
            OutputFile(
                path=f"{out}/{found.path}",
                task=tid,
                size=found.size,
                modified=datetime.fromtimestamp(found.modified, UTC),
            )
            for found in walk.files
            if found.path != MERGE_MARKER
        ]
        if walk.cut is not None:
            cut = walk.cut
            if walk.cut != "depth":
                break
    return OutputListing(sorted(files, key=lambda f: f.path), cut is not None, cut)


@dataclass
class OpenOutput:
    """An output file, open for reading (the caller closes `handle`)."""

    handle: BinaryIO
    name: str
    size: int


def output_file(run_id: str, path: str) -> OpenOutput:
    """The file of an output path (relative to the store) of this run, open; OutputNotFound
    when the path is not a regular file inside one of the run's task outputs, reached without
    following a link."""
    parts = PurePosixPath(path).parts
    expected = ("runs", run_id, "tasks")
    if (
        len(parts) < 6
        or parts[:3] != expected
        or parts[4] != "out"
        or any(p in ("..", ".", "") for p in parts)
        or parts[-1] == MERGE_MARKER
    ):
        raise OutputNotFound(f"{path!r} is no output file of run {run_id}")
    try:
        handle = store_reads.open_file(store_root(), PurePosixPath(*parts))
    except FileNotFoundError:
        raise OutputNotFound(f"{path!r} is no output file of run {run_id}") from None
    return OpenOutput(handle, parts[-1], os.fstat(handle.fileno()).st_size)


@dataclass(frozen=True)
class ByteRange:
    """Bytes `start` to `end` of a file, both included."""

    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start + 1

    def content_range(self, size: int) -> str:
        return f"bytes {self.start}-{self.end}/{size}"


def byte_range(header: str | None, size: int) -> ByteRange | None:
    """The one range a `Range` header selects, None for the whole file.

    A header that is not a single `bytes=` range is ignored (the whole file is served, as
    RFC 9110 allows); a range that selects no byte raises RangeNotSatisfiable.
    """
    if not header:
        return None
    match = _RANGE.match(header.strip())
    if match is None or (not match.group(1) and not match.group(2)):
        return None
    first, last = match.group(1), match.group(2)
    if not first:  # the last N bytes
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise RangeNotSatisfiable(f"bytes=-{suffix} selects nothing of {size} bytes")
        return ByteRange(max(0, size - suffix), size - 1)
    start = int(first)
    end = size - 1 if not last else min(int(last), size - 1)
    if last and int(last) < start:
        return None  # an invalid range is ignored
    if start >= size:
        raise RangeNotSatisfiable(f"bytes={start}- starts beyond the {size} bytes of the file")
    return ByteRange(start, end)

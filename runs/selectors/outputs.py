"""The output files of a run's tasks (S10) and the byte ranges a download may ask for.

Paths are relative to the run store (`runs/<run>/tasks/<task>/out/...`), the same for every
client that mounts the store. Only regular files inside a task's `out/` are listed or served;
links are neither followed nor listed, so nothing outside the output can be read through them.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from runs.store import run_paths, store
from simrun_harness.layout import MERGE_MARKER

MAX_LISTED = 10_000
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


def run_outputs(run_id: str, task_id: str | None = None, limit: int = MAX_LISTED) -> OutputListing:
    """The files of the outputs of a run's tasks (of one task when given), sorted by path."""
    root = store().root
    tasks_dir = run_paths(run_id).tasks
    try:
        task_ids = [task_id] if task_id else sorted(os.listdir(tasks_dir))
    except FileNotFoundError:
        return OutputListing([], False)
    files: list[OutputFile] = []
    for tid in task_ids:
        out = tasks_dir / tid / "out"
        for dirpath, dirnames, filenames in os.walk(out, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames):
                if dirpath == str(out) and name == MERGE_MARKER:
                    continue
                path = Path(dirpath) / name
                info = path.lstat()
                if not stat.S_ISREG(info.st_mode):
                    continue
                if len(files) >= limit:
                    return OutputListing(sorted(files, key=lambda f: f.path), True)
                files.append(
                    OutputFile(
                        path=path.relative_to(root).as_posix(),
                        task=tid,
                        size=info.st_size,
                        modified=datetime.fromtimestamp(info.st_mtime, UTC),
                    )
                )
    return OutputListing(sorted(files, key=lambda f: f.path), False)


def output_file(run_id: str, path: str) -> Path:
    """The file of an output path (relative to the store) of this run; OutputNotFound when
    the path is not a regular file inside one of the run's task outputs."""
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
    file = store().root.joinpath(*parts)
    out = store().root.joinpath(*parts[:5])
    try:
        info = file.lstat()
        inside = file.resolve(strict=True).is_relative_to(out.resolve(strict=True))
    except (OSError, RuntimeError):
        raise OutputNotFound(f"{path!r} is no output file of run {run_id}") from None
    if not stat.S_ISREG(info.st_mode) or not inside:
        raise OutputNotFound(f"{path!r} is no output file of run {run_id}")
    return file


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

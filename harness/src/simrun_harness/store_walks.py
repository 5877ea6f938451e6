"""Walks of a directory of the run store, never through a link: every regular file below it,
for listings of outputs and crates (`walk_files`, within limits of entries, depth, time and
files kept, saying why it was cut) and for sums over a whole store (`iter_files`, no limit but
depth). Each directory is opened below its parent's descriptor with `O_NOFOLLOW`, from a
directory opened as `simrun_harness.store_reads` opens one; names and kinds come from the
listing itself, so a link, a FIFO or a device is neither listed nor opened. Only the standard
library: the harness runs inside model environments.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from simrun_harness.store_reads import DIR_FLAGS, NotInStore, StorePath, open_dir


@dataclass(frozen=True)
class WalkLimits:
    """How far a listing goes: entries looked at, directory levels, seconds, files kept."""

    entries: int = 100_000
    depth: int = 32
    seconds: float = 1.0
    files: int | None = None


@dataclass(frozen=True)
class FoundFile:
    path: str
    """Relative to the walked directory, with `/`."""
    size: int
    modified: float
    inode: tuple[int, int]
    links: int


@dataclass
class Walk:
    """The regular files below a directory (sorted by path) and why the walk was cut, if it
    was: "entries", "depth", "time" or "files" (the limit of the same name was reached)."""

    files: list[FoundFile] = field(default_factory=list)
    cut: str | None = None
    seen: int = 0
    """Directory entries looked at."""


class _Cut(Exception):
    def __init__(self, why: str) -> None:
        self.why = why


def walk_files(root: Path, path: StorePath, limits: WalkLimits) -> Walk:
    """Every regular file below the directory `path` (links neither listed nor followed),
    in sorted order, within `limits`; an absent directory is an empty walk."""
    walk = Walk()
    state = _WalkState(limits, time.monotonic() + limits.seconds)
    try:
        fd = open_dir(root, path)
    except NotInStore:
        return walk
    try:
        _walk_into(fd, "", 1, walk, state)
    except _Cut as cut:
        walk.cut = cut.why
    finally:
        os.close(fd)
        walk.seen = state.seen
    walk.files.sort(key=lambda f: f.path)
    return walk


@dataclass
class _WalkState:
    limits: WalkLimits
    deadline: float
    seen: int = 0

    @property
    def scan_deadline(self) -> float:
        """Reading names stops a quarter of the time before the end, so the files kept of a
        directory too large for the time are still looked at and listed."""
        return self.deadline - self.limits.seconds / 4


def _walk_into(fd: int, prefix: str, depth: int, walk: Walk, state: _WalkState) -> None:
    """List one directory (what was read of it, when a limit stops the read), then its
    subdirectories in order; _Cut at a limit of entries, time or files. Names and kinds come
    from the listing itself; only the files kept are looked at (`lstat`)."""
    files: list[str] = []
    dirs: list[str] = []
    stop = None
    with os.scandir(fd) as scan:
        for item in scan:
            state.seen += 1
            if state.seen > state.limits.entries:
                stop = "entries"
            elif time.monotonic() > state.scan_deadline:
                stop = "time"
            if stop is not None:
                break
            with suppress(OSError):
                if item.is_file(follow_symlinks=False):
                    files.append(item.name)
                elif item.is_dir(follow_symlinks=False):
                    dirs.append(item.name)
    for name in sorted(files):
        if state.limits.files is not None and len(walk.files) >= state.limits.files:
            raise _Cut("files")
        if time.monotonic() > state.deadline:
            raise _Cut("time")
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue  # removed since it was listed
        if stat.S_ISREG(info.st_mode):
            walk.files.append(
                FoundFile(
                    prefix + name,
                    info.st_size,
                    info.st_mtime,
                    (info.st_dev, info.st_ino),
                    info.st_nlink,
                )
            )
    if stop is not None:
        raise _Cut(stop)
    for name in sorted(dirs):
        if depth >= state.limits.depth:
            walk.cut = walk.cut or "depth"
            continue
        try:
            child = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
        except OSError:
            continue  # replaced or removed since it was listed
        try:
            _walk_into(child, f"{prefix}{name}/", depth + 1, walk, state)
        finally:
            os.close(child)


def iter_files(root: Path, path: StorePath, *, depth: int = 256) -> Iterator[FoundFile]:
    """Every regular file below the directory `path` (none when it is absent or a link),
    one at a time in directory order, no link followed: for sums over a whole store (usage,
    cleanup), where a listing's limits would cut the answer."""
    try:
        fd = open_dir(root, path)
    except NotInStore:
        return
    try:
        yield from _iter_into(fd, "", depth)
    finally:
        os.close(fd)


def _iter_into(fd: int, prefix: str, depth: int) -> Iterator[FoundFile]:
    with os.scandir(fd) as scan:
        for item in scan:
            try:
                info = item.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                yield FoundFile(
                    prefix + item.name,
                    info.st_size,
                    info.st_mtime,
                    (info.st_dev, info.st_ino),
                    info.st_nlink,
                )
            elif stat.S_ISDIR(info.st_mode) and depth > 1:
                try:
                    child = os.open(item.name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
                except OSError:
                    continue
                try:
                    yield from _iter_into(child, f"{prefix}{item.name}/", depth - 1)
                finally:
                    os.close(child)

"""Reading files of the store for a crate without ever following a link.

Run code may replace any file or directory of its run with a link; a crate must hold what the
store holds, not what a link points at. Every component of a path is opened relative to its
parent's descriptor with `O_NOFOLLOW`, so a link anywhere on the way is refused, not followed;
a directory is listed from its descriptor and only regular files are taken.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath
from typing import BinaryIO

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class NotARegularFile(OSError):
    """A path that is a link, a directory, a device or missing where a file was expected."""


def _parts(rel: str) -> list[str]:
    parts = [p for p in PurePosixPath(rel).parts if p not in ("", ".")]
    if any(p == ".." or "/" in p for p in parts) or PurePosixPath(rel).is_absolute():
        raise NotARegularFile(f"{rel!r}: not a path inside the store")
    return parts


@contextmanager
def _directory(root: Path, parts: list[str]) -> Iterator[int]:
    """A descriptor of root/parts, every component opened without following links."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def open_file(root: Path, rel: str) -> BinaryIO:
    """root/rel opened for reading, if every component is no link and it is a regular file."""
    parts = _parts(rel)
    if not parts:
        raise NotARegularFile(f"{rel!r}: not a file")
    try:
        with _directory(root, parts[:-1]) as parent:
            fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise NotARegularFile(f"{rel}: not a regular file of the store ({exc.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise NotARegularFile(f"{rel}: not a regular file of the store")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def regular_files(root: Path, rel: str) -> Iterator[tuple[str, int]]:
    """(path below rel, size) of every regular file under root/rel, sorted; links, devices and
    whatever lies behind a linked directory are left out. Nothing when rel is no directory."""
    try:
        with _directory(root, _parts(rel)) as fd:
            yield from _walk(fd, "")
    except OSError:
        return


def _walk(fd: int, prefix: str) -> Iterator[tuple[str, int]]:
    entries = []
    with os.scandir(fd) as listing:
        for entry in listing:
            with suppress(OSError):
                entries.append((entry.name, entry.stat(follow_symlinks=False)))
    for name, info in sorted(entries):
        path = f"{prefix}{name}"
        if stat.S_ISREG(info.st_mode):
            yield path, info.st_size
        elif stat.S_ISDIR(info.st_mode):
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # replaced by a link meanwhile: not followed
            try:
                yield from _walk(child, f"{path}/")
            finally:
                os.close(child)

"""Reading the run store without ever following a link.

The code of a run may replace any file or directory of its run with a symbolic link (to `/`,
to the service's secret key, to `/proc/self/environ`), a FIFO, a device or a socket. Every
read of a run's or a snapshot's files by the service (outputs, logs, progress, reports,
reuse, cleanup) and every read of another run's files by a pod (reuse) goes through this
module: a path is taken relative to a trusted root (the store) and each of its components is
opened without following a link, with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where
the kernel has it (Linux 5.6), else component by component with `O_NOFOLLOW | O_DIRECTORY`
from a directory descriptor. A link, a device, a FIFO or a socket reads as absent
(`NotInStore`, a FileNotFoundError); a FIFO is never waited on (`O_NONBLOCK`) and the type of
a file is checked before it is opened, so no device is opened for its side effects. (A file
swapped for a device between that check and the open is opened non-blocking and closed at
once; making a device needs CAP_MKNOD.)

Listings never descend into a link (walks of a whole tree, within limits of entries, depth and
time: `simrun_harness.store_walks`). Only the standard library: the harness runs inside model
environments.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import BinaryIO

RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
SYS_OPENAT2 = 437  # the same number on every Linux architecture (added after 424)
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NONBLOCK
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
_ABSENT = frozenset(
    {errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EXDEV, errno.ENXIO, errno.EACCES}
)
_UNAVAILABLE = frozenset({errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG})

StorePath = str | PurePath


class NotInStore(FileNotFoundError):
    """Absent, or not a plain file or directory reached without a link: read as absent."""


class TooLarge(OSError):
    """A file longer than the reader's limit."""

    def __init__(self, path: StorePath, limit: int) -> None:
        super().__init__(errno.EFBIG, f"larger than {limit} bytes", str(path))


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _Openat2:
    """The `openat2` system call through libc's `syscall`, or None where it is missing.

    Whether the kernel has it is learnt once per process from the first call: ENOSYS (an
    older kernel), EPERM (a seccomp filter that does not know it), EINVAL or E2BIG (a kernel
    that does not know a flag) mean never again; after a call succeeded every error is real.
    """

    def __init__(self) -> None:
        self.works: bool | None = None
        self._call = None
        if sys.platform.startswith("linux"):
            with suppress(OSError, AttributeError):
                libc = ctypes.CDLL(None, use_errno=True)
                self._call = libc.syscall
                self._call.restype = ctypes.c_long
        if self._call is None:
            self.works = False

    def __call__(self, dir_fd: int, relative: str, flags: int) -> int | None:
        """A descriptor, or None when the kernel has no openat2 (use the fallback)."""
        if self.works is False or self._call is None:
            return None
        resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
        how = _OpenHow(flags, 0, resolve)
        fd = int(
            self._call(
                ctypes.c_long(SYS_OPENAT2),
                ctypes.c_int(dir_fd),
                ctypes.c_char_p(os.fsencode(relative)),
                ctypes.byref(how),
                ctypes.c_size_t(ctypes.sizeof(how)),
            )
        )
        if fd >= 0:
            self.works = True
            return fd
        code = ctypes.get_errno()
        if self.works is None and code in _UNAVAILABLE:
            self.works = False
            return None
        raise OSError(code, os.strerror(code), relative)


openat2 = _Openat2()


def _absent(path: StorePath, code: int = errno.ENOENT) -> NotInStore:
    return NotInStore(code, os.strerror(code), str(path))


def parts_of(root: Path, path: StorePath) -> tuple[str, ...]:
    """The components of `path` below `root`: an absolute path must lie below the root, a
    relative one is taken from it; NotInStore for a path outside the root or with a `..`."""
    given = PurePath(path)
    if given.is_absolute():
        try:
            given = given.relative_to(os.path.abspath(root))
        except ValueError:
            raise _absent(path, errno.EXDEV) from None
    parts = tuple(p for p in given.parts if p not in ("", "."))
    if any(p == ".." or "\x00" in p for p in parts):
        raise _absent(path, errno.EXDEV)
    return parts


def _open_root(root: Path) -> int:
    """The trusted root itself (the operator's path: links in it are the operator's)."""
    return os.open(root, DIR_FLAGS)


def _walk_down(root_fd: int, parts: tuple[str, ...], shown: StorePath) -> int:
    """A descriptor of the directory `parts` below `root_fd`, no link followed."""
    if not parts:
        return os.dup(root_fd)
    try:
        fd = openat2(root_fd, "/".join(parts), DIR_FLAGS)
    except OSError as exc:
        if exc.errno in _ABSENT:
            raise _absent(shown, exc.errno) from None
        raise
    if fd is not None:
        return fd
    fd = os.dup(root_fd)
    for part in parts:
        try:
            next_fd = os.open(part, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
        except OSError as exc:
            if exc.errno in _ABSENT:
                raise _absent(shown, exc.errno) from None
            raise
        finally:
            os.close(fd)
        fd = next_fd
    return fd


def open_dir(root: Path, path: StorePath) -> int:
    """A descriptor of the directory `path` below `root` (the caller closes it)."""
    parts = parts_of(root, path)
    root_fd = _open_root(root)
    try:
        return _walk_down(root_fd, parts, path)
    finally:
        os.close(root_fd)


@contextmanager
def directory(root: Path, path: StorePath) -> Iterator[int]:
    """`open_dir` for a `with` block."""
    fd = open_dir(root, path)
    try:
        yield fd
    finally:
        os.close(fd)


def _open_leaf(dir_fd: int, name: str, shown: StorePath) -> int:
    """A regular file `name` in `dir_fd`, its type checked before and after the open."""
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in _ABSENT:
            raise _absent(shown, exc.errno) from None
        raise
    if not stat.S_ISREG(before.st_mode):
        raise _absent(shown)
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in _ABSENT:
            raise _absent(shown, exc.errno) from None
        raise
    after = os.fstat(fd)
    if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (
        before.st_dev,
        before.st_ino,
    ):
        os.close(fd)
        raise _absent(shown)
    return fd


def open_file(root: Path, path: StorePath) -> BinaryIO:
    """The regular file `path` below `root`, open for reading; NotInStore if it is absent,
    reached through a link, or not a regular file."""
    parts = parts_of(root, path)
    if not parts:
        raise _absent(path)
    with directory(root, PurePath(*parts[:-1]) if len(parts) > 1 else "") as dir_fd:
        fd = _open_leaf(dir_fd, parts[-1], path)
    return os.fdopen(fd, "rb")


def read_bytes(root: Path, path: StorePath, *, limit: int) -> bytes:
    """The bytes of a regular file below `root`; TooLarge beyond `limit` bytes. A read takes
    what the file holds, not the limit: `read(n)` sets n bytes aside before it reads (a 4 MiB
    limit was 4 MiB of a worker's memory for a key file of a kilobyte)."""
    with open_file(root, path) as handle:
        expected = os.fstat(handle.fileno()).st_size
        data = handle.read(min(limit, expected) + 1)
        if expected < len(data) <= limit:  # it grew since: the rest, up to one byte past
            data += handle.read(limit + 1 - len(data))
    if len(data) > limit:
        raise TooLarge(path, limit)
    return data


def file_stat(root: Path, path: StorePath) -> os.stat_result:
    """The status of a regular file below `root` (not following a link)."""
    with open_file(root, path) as handle:
        return os.fstat(handle.fileno())


def kind(root: Path, path: StorePath) -> str | None:
    """ "file", "dir", or None (absent, a link, or anything else) of `path` below `root`."""
    parts = parts_of(root, path)
    try:
        if not parts:
            return "dir"
        with directory(root, PurePath(*parts[:-1]) if len(parts) > 1 else "") as dir_fd:
            info = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
    except NotInStore:
        return None
    except OSError as exc:
        if exc.errno in _ABSENT:
            return None
        raise
    if stat.S_ISREG(info.st_mode):
        return "file"
    return "dir" if stat.S_ISDIR(info.st_mode) else None


def is_file(root: Path, path: StorePath) -> bool:
    return kind(root, path) == "file"


def is_dir(root: Path, path: StorePath) -> bool:
    return kind(root, path) == "dir"


def names(root: Path, path: StorePath, *, limit: int | None = None) -> list[str]:
    """The names in the directory `path` below `root` (every kind; at most `limit`), listed
    (a listing revalidates a directory on NFS); NotInStore when it is no directory."""
    found: list[str] = []
    with directory(root, path) as fd, os.scandir(fd) as entries:
        for entry in entries:
            if limit is not None and len(found) >= limit:
                break
            found.append(entry.name)
    return found


COUNT_STABLE_S = 2.0  # a directory unchanged this long has its count kept (see `count`)
_COUNTS_KEPT = 256
_counts: dict[tuple[int, int], tuple[int, int]] = {}  # (device, inode): (mtime in ns, count)


def count(root: Path, path: StorePath) -> int:
    """How many names the directory `path` below `root` holds (none kept in memory).

    The count of a directory last changed `COUNT_STABLE_S` ago or more is kept with its
    modification time and given again while that time stays (any entry added or removed
    moves it): the 100,000 done units of a finished task are counted once per process, not
    at every view of it. A directory changed more recently is counted every time, since a
    change within its clock's granularity would not move the time."""
    with directory(root, path) as fd:
        info = os.fstat(fd)
        key = (info.st_dev, info.st_ino)
        kept = _counts.get(key)
        if kept is not None and kept[0] == info.st_mtime_ns:
            return kept[1]
        found = 0
        with os.scandir(fd) as scan:
            for _ in scan:
                found += 1
        if time.time() - info.st_mtime_ns / 1e9 >= COUNT_STABLE_S:
            while len(_counts) >= _COUNTS_KEPT:
                _counts.pop(next(iter(_counts)), None)
            _counts[key] = (info.st_mtime_ns, found)
        return found


@dataclass(frozen=True)
class Entry:
    """A regular file or a directory found in a listing."""

    name: str
    is_dir: bool
    size: int
    modified: float


def entries(root: Path, path: StorePath, *, limit: int | None = None) -> list[Entry]:
    """The regular files and directories in `path` below `root`, links and the rest left
    out; at most `limit` entries of any kind are looked at."""
    found: list[Entry] = []
    with directory(root, path) as fd, os.scandir(fd) as scan:
        for looked, item in enumerate(scan):
            if limit is not None and looked >= limit:
                break
            found.extend(_entry(item))
    return found


def _entry(item: os.DirEntry[str]) -> list[Entry]:
    try:
        info = item.stat(follow_symlinks=False)
    except OSError:
        return []  # removed since it was listed
    if stat.S_ISDIR(info.st_mode):
        return [Entry(item.name, True, 0, info.st_mtime)]
    if stat.S_ISREG(info.st_mode):
        return [Entry(item.name, False, info.st_size, info.st_mtime)]
    return []


# --- the service's own writes into a run -----------------------------------------------------


def write_file(root: Path, path: StorePath, data: bytes, *, make_dirs: int = 0) -> None:
    """Write `data` as the regular file `path` below `root`, through a temporary name and a
    rename: whatever was at `path` (a link too) is replaced, nothing is written through a
    link. The last `make_dirs` directories of the path are made when missing, and replaced
    when something else (a link, a file) holds their name; the others must be directories.
    """
    parts = parts_of(root, path)
    if not parts:
        raise _absent(path, errno.EISDIR)
    keep = len(parts) - 1 - make_dirs
    with directory(root, PurePath(*parts[:keep]) if keep > 0 else "") as top:
        fd = os.dup(top)
    try:
        for part in parts[keep:-1]:
            parent, fd = fd, -1
            fd = _own_dir(parent, part)
        tmp = f".{parts[-1]}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fd)
        try:
            with os.fdopen(out, "wb") as handle:
                handle.write(data)
            os.rename(tmp, parts[-1], src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            with suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise
    finally:
        if fd >= 0:
            os.close(fd)


def _own_dir(parent: int, name: str) -> int:
    """The directory `name` in `parent`, made if missing, replacing what else holds the name
    (closes `parent`)."""
    try:
        for _ in range(3):
            try:
                return os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent)
            except FileNotFoundError:
                with suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=parent)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                os.unlink(name, dir_fd=parent)  # a link or a file where a directory belongs
        raise _absent(name)
    finally:
        os.close(parent)

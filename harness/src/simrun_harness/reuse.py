"""Reuse of done work: unit keys, and linking outputs an earlier run computed.

The service decides what a task reuses (it knows the environment, the sources and the type's
version) and writes `reuse.json` into the task directory before any pod starts:

    {"units": {"u000003": "runs/<run>/tasks/<task>/units/u000003", ...}}   a split task
    {"out": "runs/<run>/tasks/<task>/out"}                                 an unsplit task

Paths are relative to the run store. The coordinator links each listed unit output into
`units/` (hard links, so deleting the earlier run keeps them readable) and creates the ledger
with those units already done, so no worker ever claims them. `simrun-exec` links a listed
`out/` into its private output and publishes it. A file that cannot be linked (no hard links
on this file system, or too many links) is copied: slower, never wrong.

No Django here: the harness runs inside model environments.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath
from typing import Any

from simrun_harness import store_reads
from simrun_harness.layout import MERGE_MARKER, TaskPaths

REUSE_FILE = "reuse.json"
KEYS_FILE = "unit-keys.json"
KEY_FORMAT = 1
_NO_LINK = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV}

log = logging.getLogger("simrun")


def canonical(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def digest(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()


def unit_keys(task_key: str, units: Sequence[Any]) -> list[str]:
    """The key of each unit: its task's key, its place in unit order and its value."""
    return [digest({"task": task_key, "index": i, "unit": u}) for i, u in enumerate(units)]


def read_plan(paths: TaskPaths) -> dict[str, Any]:
    """What the service asked this task to reuse; {} without `reuse.json` (reuse is off)."""
    try:
        plan: dict[str, Any] = json.loads((paths.root / REUSE_FILE).read_text())
    except FileNotFoundError:
        return {}
    return plan


def _source(relative: str) -> PurePosixPath:
    path = PurePosixPath(relative)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f"{REUSE_FILE}: {relative!r} must be a relative path inside the store")
    return path


def link_tree(source_fd: int, target: Path, *, skip: frozenset[str] = frozenset()) -> None:
    """Recreate the directory open at `source_fd` at `target` (absent), its regular files
    hard-linked (copied where the file system has no hard links), its directories entered
    without following a link. Links, devices, FIFOs and sockets are not carried over: the
    earlier run's code may have put them there, and this run's code would follow them."""
    target.mkdir()
    with os.scandir(source_fd) as scan:
        listed = []
        for entry in scan:
            with suppress(OSError):
                listed.append((entry.name, entry.stat(follow_symlinks=False)))
    for name, info in listed:
        if name in skip:
            continue
        dest = target / name
        if stat.S_ISDIR(info.st_mode):
            child = os.open(name, store_reads.DIR_FLAGS | os.O_NOFOLLOW, dir_fd=source_fd)
            try:
                link_tree(child, dest)
            finally:
                os.close(child)
        elif stat.S_ISREG(info.st_mode):
            _link_file(source_fd, name, dest)


def _link_file(source_fd: int, name: str, dest: Path) -> None:
    """Hard-link the regular file `name`; where that cannot be, copy it (mode and times too)."""
    try:
        os.link(name, dest, src_dir_fd=source_fd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
        fd = os.open(name, store_reads.FILE_FLAGS, dir_fd=source_fd)
        with os.fdopen(fd, "rb") as source:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return  # replaced since it was listed
            with dest.open("wb") as out:
                shutil.copyfileobj(source, out)
        os.chmod(dest, stat.S_IMODE(info.st_mode))
        os.utime(dest, ns=(info.st_atime_ns, info.st_mtime_ns))


@contextmanager
def _source_dir(store_root: Path, relative: str) -> Iterator[int]:
    """The planned source directory below the store, reached without following a link;
    FileNotFoundError when it is gone, or a link, or no directory."""
    with store_reads.directory(store_root, _source(relative)) as fd:
        yield fd


def link_units(paths: TaskPaths, store_root: Path, names: Sequence[str]) -> set[str]:
    """Link the planned unit outputs into `units/`; the names whose output is now in place.

    Call before the ledger exists. A planned source that is gone (its run deleted meanwhile)
    or is no directory reached without a link (the earlier run's code replaced it) is
    skipped: that unit is computed. A unit already in place (a retried coordinator) counts.
    """
    planned: dict[str, str] = read_plan(paths).get("units", {})
    wanted = set(names)
    paths.units.mkdir(parents=True, exist_ok=True)
    linked: set[str] = set()
    for name, relative in planned.items():
        if name not in wanted:
            continue
        final = paths.unit_dir(name)
        if final.is_dir():
            linked.add(name)
            continue
        tmp = paths.units / f".{name}.reuse.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            with _source_dir(store_root, relative) as source:
                link_tree(source, tmp)
            os.rename(tmp, final)
        except FileNotFoundError:
            shutil.rmtree(tmp, ignore_errors=True)
            log.warning("%s: %s is gone; the unit is computed", name, relative)
            continue
        linked.add(name)
    return linked


def link_output(paths: TaskPaths, store_root: Path, tmp: Path) -> bool:
    """Fill the private output `tmp` (empty) from the planned earlier `out/`; False if none,
    or when it is gone, incomplete or reached only through a link."""
    relative = read_plan(paths).get("out")
    if not relative:
        return False
    if not store_reads.is_file(store_root, _source(relative) / MERGE_MARKER):
        log.warning("%s is gone or incomplete; the task is computed", relative)
        return False
    tmp.rmdir()
    try:
        with _source_dir(store_root, relative) as source:
            link_tree(source, tmp, skip=frozenset({MERGE_MARKER}))
    except FileNotFoundError:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        return False
    return True


def store_root_of(run_dir: Path) -> Path:
    """The run store of a run directory (`<store>/runs/<run>`)."""
    return run_dir.parent.parent

"""Reuse of done work: unit keys, and linking outputs an earlier run computed.

The service decides what a task reuses (it knows the environment, the sources and the type's
version) and writes `reuse.json` into the task directory before any pod starts:

    {"from": [["runs/<run>/tasks/<task>", [[3, 10], [12, 13]]], ...]}   a split task
    {"out": "runs/<run>/tasks/<task>/out"}                               an unsplit task

A split task's plan lists, per earlier task, the ranges of unit indices (start included, end
not) whose outputs it takes from that task's `units/`; the plan of an earlier simrun,
`{"units": {"u000003": "runs/<run>/tasks/<task>/units/u000003", ...}}`, is read too. Paths
are relative to the run store.

The keys of a split task's units are `unit-keys.txt` in its directory: one key per line, in
unit order (the unit's place is its line), written by the service as it reads the units the
plugin listed (one canonical JSON line each, `units.jsonl`), so a task of a million units is
keyed without holding them: `write_unit_keys`, `read_unit_keys` (which reads the one JSON
object `unit-keys.json` of an earlier simrun too).

The coordinator links each listed unit output into `units/` (hard links, so deleting the
earlier run keeps them readable) and creates the ledger
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
KEYS_FILE = "unit-keys.txt"
OLD_KEYS_FILE = "unit-keys.json"
UNITS_LIST_FILE = "units.jsonl"
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


def unit_key_of_line(task_key: str, index: int, line: str) -> str:
    """`unit_keys` of one unit from its canonical JSON line, without parsing it: the
    canonical text of {"index", "task", "unit"} is these three in this order."""
    text = f'{{"index":{index},"task":{json.dumps(task_key)},"unit":{line}}}'
    return hashlib.sha256(text.encode()).hexdigest()


def write_unit_keys(task_key: str, units_file: Path, out: Path) -> int:
    """Key the units of `units_file` (one canonical JSON line each) into `out`, one key a
    line, streamed and renamed into place; the number of units."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}")
    count = 0
    with units_file.open() as units, tmp.open("w") as keys:
        for index, line in enumerate(units):
            keys.write(unit_key_of_line(task_key, index, line.rstrip("\n")))
            keys.write("\n")
            count += 1
    os.replace(tmp, out)
    return count


OLD_KEYS_MAX = 128 * 1024 * 1024
"""The largest unit-keys JSON object of an earlier simrun read (about 80 bytes a unit)."""


def read_unit_keys(store_root: Path, task_dir: Path) -> Iterator[str] | None:
    """The keys of a task's units in unit order (from `unit-keys.txt`, or the JSON object of
    an earlier simrun), read without following a link the task's code may have put there;
    None when the task has none (never keyed, gone, or a link)."""
    try:
        handle = store_reads.open_file(store_root, task_dir / KEYS_FILE)
    except FileNotFoundError:
        try:
            raw = store_reads.read_bytes(store_root, task_dir / OLD_KEYS_FILE, limit=OLD_KEYS_MAX)
            old: dict[str, str] = json.loads(raw)
        except (OSError, ValueError):
            return None
        if not isinstance(old, dict):
            return None
        return iter([str(old[name]) for name in sorted(old, key=lambda n: int(n[1:]))])
    except OSError:
        return None

    def stream() -> Iterator[str]:
        with handle:
            for line in handle:
                yield line.decode(errors="replace").rstrip("\n")

    return stream()


def planned_units(plan: dict[str, Any], names: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(unit name, the earlier unit's directory relative to the store) of a plan, in either
    form; `names` are this task's unit names (an earlier task with the same key has the same
    units, so the same names)."""
    for source, ranges in plan.get("from", []):
        for start, end in ranges:
            for index in range(max(0, start), min(end, len(names))):
                yield names[index], f"{source}/units/{names[index]}"
    wanted = set(names) if plan.get("units") else set()
    for name, relative in plan.get("units", {}).items():
        if name in wanted:
            yield name, relative


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
    paths.units.mkdir(parents=True, exist_ok=True)
    linked: set[str] = set()
    for name, relative in planned_units(read_plan(paths), names):
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

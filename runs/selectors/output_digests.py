"""The SHA-256 of every output file of a run, to say whether two runs made the same bytes
(`compare`'s outputs section: a run made again from a crate against the original).

Files are listed and read as the outputs are served (`runs.selectors.outputs`, no link
followed). A comparison is a request, so it hashes for SIMRUN_COMPARE_MAX_S at most, every
run it compares together (`deadline`): a run whose files were not all hashed by then, or
with more output files or bytes than it hashes at all, says so and names the files left,
rather than keeping a request thread for minutes.

The digests of an ended run's files are kept (`DigestCache`, in this process) by the file's
device, inode, size and modification and change times, and looked up by the same: a
comparison asked again hashes only what changed or was not hashed before, so it gets further
each time; a file written again has another change time, and is hashed again.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from django.conf import settings

from runs.selectors.outputs import OutputNotFound, output_file, run_outputs

MAX_FILES = 2_000
MAX_BYTES = 2 * 1024**3
CHUNK = 1024 * 1024
KEPT_DIGESTS = 50_000
"""The most file digests a process keeps (a few MiB)."""

FileKey = tuple[int, int, int, int, int]


class DigestCache:
    """The digests of files by (device, inode, size, mtime_ns, ctime_ns), the least recently
    used dropped beyond `size`; shared by a process's request threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: OrderedDict[FileKey, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: FileKey) -> str | None:
        with self._lock:
            digest = self._kept.get(key)
            if digest is not None:
                self._kept.move_to_end(key)
            return digest

    def put(self, key: FileKey, digest: str) -> None:
        with self._lock:
            self._kept[key] = digest
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)


digests_kept = DigestCache(KEPT_DIGESTS)


@dataclass(frozen=True)
class OutputDigests:
    """Each output file's digest by `<task>/<path below out/>`, or why not all were taken:
    the files left (when they are known) and why."""

    digests: dict[str, str]
    not_compared: str = ""
    left: tuple[str, ...] = ()


def deadline() -> float:
    """The monotonic time a comparison begun now stops hashing."""
    return time.monotonic() + float(settings.SIMRUN_COMPARE_MAX_S)


def _late() -> str:
    return f"SIMRUN_COMPARE_MAX_S ({float(settings.SIMRUN_COMPARE_MAX_S):g} s) passed"


def _key(info: os.stat_result) -> FileKey:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _digest(run_id: str, path: str, until: float, keep: bool) -> str | None:
    """The file's digest ("" when it is gone), or None once `until` passed; kept when `keep`
    and the file did not change while it was read."""
    try:
        opened = output_file(run_id, path)
    except OutputNotFound:
        return ""  # gone or replaced by a link since it was listed
    with opened.handle as stream:
        before = _key(os.fstat(stream.fileno()))
        known = digests_kept.get(before)
        if known is not None:
            return known
        digest = hashlib.sha256()
        while True:
            if time.monotonic() >= until:
                return None
            chunk = stream.read(CHUNK)
            if not chunk:
                break
            digest.update(chunk)
        if keep and _key(os.fstat(stream.fileno())) == before:
            digests_kept.put(before, digest.hexdigest())
    return digest.hexdigest()


def output_digests(
    run_id: str,
    *,
    until: float | None = None,
    keep: bool = False,
    max_files: int = MAX_FILES,
    max_bytes: int = MAX_BYTES,
) -> OutputDigests:
    """The digests of a run's output files, if it has at most `max_files` of them holding
    at most `max_bytes` in all, those hashed by the monotonic time `until` (by default
    SIMRUN_COMPARE_MAX_S from now); kept for next
    time when `keep` (the run has ended: its outputs are final)."""
    until = deadline() if until is None else until
    if time.monotonic() >= until:
        return OutputDigests({}, f"not hashed: {_late()} before its turn")
    listing = run_outputs(run_id, limit=max_files + 1, seconds=until - time.monotonic())
    if listing.cut == "files" or len(listing.files) > max_files:
        return OutputDigests({}, f"more than {max_files} output files")
    if listing.cut is not None:
        why = "SIMRUN_LISTING_MAX_S or " + _late() if listing.cut == "time" else listing.cut
        return OutputDigests({}, f"its outputs were not listed whole ({why})")
    if sum(f.size for f in listing.files) > max_bytes:
        return OutputDigests({}, f"more than {max_bytes} bytes of outputs")
    digests: dict[str, str] = {}
    keys = [f.path.split("/tasks/", 1)[1].replace("/out/", "/", 1) for f in listing.files]
    for place, (key, found) in enumerate(zip(keys, listing.files, strict=True)):
        digest = _digest(run_id, found.path, until, keep)
        if digest is None:
            left = tuple(keys[place:])
            why = f"{len(left)} of {len(keys)} files not hashed: {_late()}"
            return OutputDigests(digests, why, left)
        if digest:
            digests[key] = digest
    return OutputDigests(digests)

"""Source snapshots: immutable directories in the store, files shared by content.

A snapshot's digest is the SHA-256 of its manifest (every file's relative path, content hash
and executable bit), so the same sources always give the same snapshot and a snapshot is
never written twice. Each file's content is kept once in `blobs/` and hard-linked into every
snapshot that has it. Plain file-system code: no Django, so uploads, the CLI and tests share it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from simrun_harness.layout import StorePaths

SKIPPED_DIRS = frozenset(
    {".git", "__pycache__", ".venv", ".simrun", ".mypy_cache", ".pytest_cache"}
)
CHUNK = 1024 * 1024
MANIFEST = ".simrun-manifest.json"
MANIFEST_MAX_BYTES = 64 * 1024 * 1024
"""The largest manifest of a snapshot the service reads (a few hundred bytes per file)."""
RESERVED_PREFIX = ".simrun-"
"""Names the store uses for itself in a snapshot or a run (`.simrun-manifest.json`,
`.simrun-merged`, ...): no source file may take one."""
NAME_MAX = 255
"""The longest name component (bytes) a Linux file system holds."""
PATH_MAX = 4000
"""The longest relative path (bytes) a snapshot keeps, below the system's 4096 with the store's
own prefix."""


class SnapshotRefused(ValueError):
    """A source that cannot become a snapshot; the message says which file and why."""


@dataclass(frozen=True)
class Provenance:
    """Where a snapshot came from."""

    source_path: str = ""
    git_remote: str = ""
    git_commit: str = ""
    git_dirty: bool | None = None


@dataclass(frozen=True)
class SnapshotInfo:
    digest: str
    files: int
    bytes: int
    provenance: Provenance


@dataclass(frozen=True)
class _Entry:
    path: str
    sha256: str
    size: int
    executable: bool


def safe_relpath(name: str) -> str:
    """A relative POSIX path that stays inside its directory, or SnapshotRefused."""
    if not name or "\x00" in name:
        raise SnapshotRefused(f"{name!r}: an empty or NUL-containing file name")
    path = PurePosixPath(name)
    if path.is_absolute() or name.startswith("\\"):
        raise SnapshotRefused(f"{name!r}: absolute paths are not allowed")
    if any(part == ".." for part in path.parts):
        raise SnapshotRefused(f"{name!r}: '..' would leave the snapshot")
    clean = "/".join(p for p in path.parts if p not in ("", "."))
    if not clean:
        raise SnapshotRefused(f"{name!r}: not a file name")
    return within_limits(clean)


def within_limits(path: str) -> str:
    """`path` (relative, clean) if a file system holds it, else SnapshotRefused naming it: no
    component over NAME_MAX bytes, at most PATH_MAX bytes in all."""
    for part in path.split("/"):
        if len(os.fsencode(part)) > NAME_MAX:
            raise SnapshotRefused(
                f"{path!r}: a name longer than {NAME_MAX} bytes, which no file system holds"
            )
    if len(os.fsencode(path)) > PATH_MAX:
        raise SnapshotRefused(f"{path[:80]!r}...: a path longer than {PATH_MAX} bytes")
    return path


def not_reserved(path: str) -> str:
    """`path` if none of its components is a name the store keeps for itself (`.simrun-*`),
    else SnapshotRefused naming it: a member `.simrun-manifest.json` would be the file the
    manifest is written to."""
    for part in path.split("/"):
        if part.startswith(RESERVED_PREFIX):
            raise SnapshotRefused(
                f"{path!r}: the name {part!r} is reserved for the store's own files "
                f"({RESERVED_PREFIX}*); rename it"
            )
    return path


def store_blob(store: StorePaths, stream: BinaryIO, *, limit: int | None = None) -> tuple[str, int]:
    """Copy a stream into the blob store by its content; returns (sha256, size).

    The content goes to a temporary file, is hashed as it is written, and is then linked to
    its hash's name only if no blob has that name (`_publish`): an existing blob is never
    opened for writing or replaced, and every blob is read-only. Raises SnapshotRefused when
    the stream is longer than `limit` bytes (nothing is kept).
    """
    store.blobs.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    fd, tmp_name = tempfile.mkstemp(dir=store.blobs, prefix=".incoming-")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := stream.read(CHUNK):
                size += len(chunk)
                if limit is not None and size > limit:
                    raise SnapshotRefused(f"a file is larger than the limit of {limit} bytes")
                digest.update(chunk)
                out.write(chunk)
        sha = digest.hexdigest()
        _publish(tmp, store.blob(sha), 0o444)
        return sha, size
    finally:
        tmp.unlink(missing_ok=True)


def _publish(tmp: Path, target: Path, mode: int) -> None:
    """Make `tmp` read-only and give it the name `target` if nothing has it yet (a hard
    link fails on an existing name, where a rename would replace it); `tmp` stays for the
    caller to remove."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp.chmod(mode)
    with suppress(FileExistsError):
        os.link(tmp, target)


def _linked_blob(store: StorePaths, entry: _Entry) -> Path:
    """The blob an entry is hard-linked to: for an executable file, the blob's executable
    copy (mode 0555), made once, since every link of a file shares its mode."""
    plain = store.blob(entry.sha256)
    if not entry.executable:
        return plain
    target = store.blob(entry.sha256, executable=True)
    if not target.exists():
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
        os.close(fd)
        try:
            shutil.copyfile(plain, tmp_name)
            _publish(Path(tmp_name), target, 0o555)
        finally:
            Path(tmp_name).unlink(missing_ok=True)
    return target


def _manifest_digest(entries: list[_Entry]) -> str:
    manifest = [[e.path, e.sha256, e.executable] for e in sorted(entries, key=lambda e: e.path)]
    return hashlib.sha256(json.dumps(manifest, separators=(",", ":")).encode()).hexdigest()


def assemble(store: StorePaths, entries: list[_Entry]) -> str:
    """Hard-link blobs into `snapshots/<digest>/`, atomically; an existing snapshot is kept."""
    digest = _manifest_digest(entries)
    target = store.snapshot(digest)
    if target.exists():
        return digest
    store.snapshots.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=store.snapshots, prefix=".staging-"))
    try:
        for entry in entries:
            _place(staging, entry, _linked_blob(store, entry))
        # a new file (`x`): never one of the hard-linked blobs, whose name it cannot have
        with (staging / MANIFEST).open("x") as manifest:
            manifest.write(
                json.dumps([[e.path, e.sha256, e.executable] for e in entries], indent=0)
            )
        try:
            staging.rename(target)
        except OSError:
            if not target.exists():
                raise
            shutil.rmtree(staging)  # another writer made the same snapshot first
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return digest


def _place(staging: Path, entry: _Entry, blob: Path) -> None:
    """Hard-link `blob` at the entry's path in the staging directory; SnapshotRefused naming
    the entry when the file system cannot hold it there (a file where a directory must be,
    a name it refuses)."""
    dest = staging / not_reserved(within_limits(entry.path))
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.link(blob, dest)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            why = "a file and a directory of the same name"
        else:
            why = f"the file system refuses the name ({exc.strerror})"
        raise SnapshotRefused(f"{entry.path!r}: cannot be stored: {why}") from None


def snapshot_directory(
    store: StorePaths, source: Path, *, max_files: int = 100_000, max_bytes: int | None = None
) -> SnapshotInfo:
    """Freeze a local directory as a snapshot (links inside it are followed; others refused)."""
    source = source.resolve()
    if not source.is_dir():
        raise SnapshotRefused(f"{source}: not a directory")
    entries: list[_Entry] = []
    total = 0
    for rel, path in _walk(source):
        if len(entries) >= max_files:
            raise SnapshotRefused(f"{source}: more than {max_files} files")
        with path.open("rb") as stream:
            sha, size = store_blob(store, stream)
        total += size
        if max_bytes is not None and total > max_bytes:
            raise SnapshotRefused(f"{source}: more than {max_bytes} bytes")
        executable = bool(path.stat().st_mode & stat.S_IXUSR)
        entries.append(_Entry(rel, sha, size, executable))
    digest = assemble(store, entries)
    return SnapshotInfo(digest, len(entries), total, git_provenance(source))


def snapshot_entries(
    store: StorePaths,
    files: Iterable[tuple[str, BinaryIO, bool]],
    *,
    max_bytes: int | None = None,
) -> tuple[str, int, int]:
    """A snapshot from (relative path, stream, executable) triples, e.g. an upload;
    (digest, files, bytes)."""
    entries: dict[str, _Entry] = {}
    total = 0
    for name, stream, executable in files:
        rel = safe_relpath(name)
        remaining = None if max_bytes is None else max_bytes - total
        sha, size = store_blob(store, stream, limit=remaining)
        total += size
        entries[rel] = _Entry(rel, sha, size, executable)
    if not entries:
        raise SnapshotRefused("a snapshot needs at least one file")
    return assemble(store, list(entries.values())), len(entries), total


def _walk(root: Path) -> Iterator[tuple[str, Path]]:
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
        base = Path(dirpath)
        for name in sorted(filenames):
            if base == root and name == MANIFEST:
                continue  # a snapshot's own manifest (the directory is a snapshot): made anew
            path = base / name
            if path.is_symlink():
                real = path.resolve()
                if not real.is_relative_to(root) or not real.is_file():
                    raise SnapshotRefused(f"{path}: a link pointing outside the source")
            elif not path.is_file():
                continue  # sockets, fifos and devices are not sources
            yield path.relative_to(root).as_posix(), path
        for name in list(dirnames):
            if (base / name).is_symlink():
                raise SnapshotRefused(f"{base / name}: a linked directory")


def git_provenance(path: Path) -> Provenance:
    """The git remote, commit and dirty state of a directory, where it is a checkout."""

    def git(*args: str) -> str | None:
        try:
            result = subprocess.run(
                ["git", "-C", str(path), *args], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return result.stdout.strip() if result.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return Provenance(source_path=str(path))
    status = git("status", "--porcelain", "--", ".")
    return Provenance(
        source_path=str(path),
        git_remote=git("remote", "get-url", "origin") or "",
        git_commit=commit,
        git_dirty=bool(status) if status is not None else None,
    )

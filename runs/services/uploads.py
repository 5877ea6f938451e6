"""Uploads of snapshots (S15): spooled to disk with a cap, checked whole, then stored.

An upload is a tar (plain or gzip) or zip archive. It is written to a temporary file in the
store's spool directory while counting bytes (never held in memory); beyond the limit it is
refused and the file removed. Before anything is extracted every member is checked: absolute
paths, `..`, links pointing outside the archive or to directories, hard links, devices and
fifos, too many members, too many unpacked bytes, and a member compressed suspiciously well
(a decompression bomb) are refused with a message naming the member. Only then are the files
fed to `runs.snapshots.snapshot_entries`, which stores each content once and hard-links it into
the snapshot. Whatever is refused leaves nothing behind: no spool file, no snapshot directory,
no blob that this upload added.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import posixpath
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, Protocol, cast

from runs.snapshots import CHUNK, SnapshotRefused, safe_relpath, snapshot_entries
from simrun_harness.layout import StorePaths

TAR, TGZ, ZIP = "tar", "tgz", "zip"
DOCUMENTED_TYPES = ("application/x-tar", "application/gzip", "application/zip")
"""The media types the API documents; the others of CONTENT_TYPES are accepted aliases."""
CONTENT_TYPES = {
    "application/x-tar": TAR,
    "application/tar": TAR,
    "application/gzip": TGZ,
    "application/x-gzip": TGZ,
    "application/x-compressed-tar": TGZ,
    "application/zip": ZIP,
    "application/x-zip-compressed": ZIP,
}
MAX_RATIO = 200
"""A member unpacking to more than this many times its compressed size is refused ..."""
RATIO_FLOOR = 1024 * 1024
"""... once it unpacks to more than this (small, very compressible files are common)."""
MAX_LINK_DEPTH = 16


_UNREADABLE = (tarfile.TarError, zipfile.BadZipFile, gzip.BadGzipFile, EOFError, zlib.error)


class UploadRefused(ValueError):
    """An upload that cannot become a snapshot; the message says which member and why."""


class UploadTooLarge(UploadRefused):
    """The body is larger than the configured limit (413)."""


class UnsupportedArchive(UploadRefused):
    """Not a tar, tar.gz or zip archive (415)."""


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


@dataclass(frozen=True)
class UploadLimits:
    max_bytes: int
    max_files: int
    max_unpacked_bytes: int


@dataclass(frozen=True)
class StoredUpload:
    digest: str
    files: int
    bytes: int


@dataclass(frozen=True)
class _Member:
    name: str
    size: int
    link: str | None = None  # the archive path a symbolic link points to
    executable: bool = False  # the owner's execute bit of a file


def archive_kind(content_type: str) -> str:
    """The archive kind of a Content-Type; UnsupportedArchive for any other."""
    media = content_type.split(";", 1)[0].strip().lower()
    kind = CONTENT_TYPES.get(media)
    if kind is None:
        allowed = ", ".join(sorted(CONTENT_TYPES))
        raise UnsupportedArchive(f"Content-Type {media or 'none'!r}: send one of {allowed}")
    return kind


def spool(body: Readable, *, directory: Path, limit: int) -> Path:
    """Copy a body into a temporary file below `directory`, at most `limit` bytes.

    Raises UploadTooLarge (and removes the file) as soon as the body passes the limit.
    """
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=directory, prefix=".upload-")
    path = Path(name)
    try:
        size = 0
        with os.fdopen(fd, "wb") as out:
            while chunk := body.read(CHUNK):
                size += len(chunk)
                if size > limit:
                    raise UploadTooLarge(f"the upload is larger than the limit of {limit} bytes")
                out.write(chunk)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path


def _member_name(name: str) -> str:
    try:
        return safe_relpath(name)
    except SnapshotRefused as exc:
        raise UploadRefused(f"member {exc}") from None


def _link_target(member: str, target: str) -> str:
    """The archive path a symbolic link at `member` points to; refused when outside."""
    if not target or target.startswith("/") or "\x00" in target:
        raise UploadRefused(f"member {member!r}: a link pointing outside the archive ({target!r})")
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(member), target))
    if joined == ".." or joined.startswith("../") or joined == ".":
        raise UploadRefused(f"member {member!r}: a link pointing outside the archive ({target!r})")
    return joined


class _Tally:
    """Counts members and unpacked bytes against the limits while the archive is read."""

    def __init__(self, limits: UploadLimits) -> None:
        self.limits = limits
        self.files = 0
        self.bytes = 0
        self.names: set[str] = set()

    def add(self, name: str, size: int) -> None:
        if name in self.names:
            raise UploadRefused(f"member {name!r}: appears twice in the archive")
        self.names.add(name)
        self.files += 1
        self.bytes += size
        if self.files > self.limits.max_files:
            raise UploadRefused(f"the archive has more than {self.limits.max_files} files")
        if self.bytes > self.limits.max_unpacked_bytes:
            raise UploadRefused(
                f"the archive unpacks to more than {self.limits.max_unpacked_bytes} bytes"
            )


def _tar_members(path: Path, kind: str, limits: UploadLimits) -> list[_Member]:
    """Check every member of a tar archive, reading it as a stream (headers before data), so
    a bomb is refused at its header without decompressing what it claims to hold."""
    tally = _Tally(limits)
    members: list[_Member] = []
    compressed = path.stat().st_size
    try:
        with tarfile.open(path, mode="r|gz" if kind == TGZ else "r|") as archive:
            for info in archive:
                if info.isdir():
                    continue
                name = _member_name(info.name)
                if info.islnk():
                    raise UploadRefused(f"member {name!r}: hard links are not allowed")
                if info.issym():
                    tally.add(name, 0)
                    members.append(_Member(name, 0, _link_target(name, info.linkname)))
                    continue
                if info.ischr() or info.isblk() or info.isfifo() or info.isdev():
                    raise UploadRefused(f"member {name!r}: devices and fifos are not allowed")
                if not info.isreg():
                    raise UploadRefused(f"member {name!r}: unsupported member type")
                tally.add(name, info.size)
                members.append(_Member(name, info.size, executable=bool(info.mode & 0o100)))
                if kind == TGZ and RATIO_FLOOR < tally.bytes > MAX_RATIO * compressed:
                    raise UploadRefused(
                        f"member {name!r}: the archive would unpack to more than {tally.bytes} "
                        f"bytes from {compressed} (more than {MAX_RATIO}:1), refused as a "
                        "decompression bomb"
                    )
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise UploadRefused(f"not a readable {kind} archive: {exc}") from None
    return members


def _zip_members(path: Path, limits: UploadLimits) -> list[_Member]:
    tally = _Tally(limits)
    members: list[_Member] = []
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.is_dir():
                    continue
                name = _member_name(info.filename)
                mode = info.external_attr >> 16
                if info.flag_bits & 0x1:
                    raise UploadRefused(f"member {name!r}: encrypted members are not allowed")
                if stat.S_ISLNK(mode):
                    if info.file_size > 4096:
                        raise UploadRefused(f"member {name!r}: a link target is too long")
                    target = archive.read(info).decode("utf-8", errors="replace")
                    tally.add(name, 0)
                    members.append(_Member(name, 0, _link_target(name, target)))
                    continue
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode):
                    raise UploadRefused(f"member {name!r}: devices and fifos are not allowed")
                if mode and stat.S_IFMT(mode) not in (0, stat.S_IFREG):
                    raise UploadRefused(f"member {name!r}: unsupported member type")
                ratio = info.file_size / max(1, info.compress_size)
                if info.file_size > RATIO_FLOOR and ratio > MAX_RATIO:
                    raise UploadRefused(
                        f"member {name!r}: unpacks to {info.file_size} bytes from "
                        f"{info.compress_size} (more than {MAX_RATIO}:1), refused as a "
                        "decompression bomb"
                    )
                tally.add(name, info.file_size)
                members.append(_Member(name, info.file_size, executable=bool(mode & 0o100)))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
        raise UploadRefused(f"not a readable zip archive: {exc}") from None
    return members


def check_archive(path: Path, kind: str, limits: UploadLimits) -> list[_Member]:
    """Every member of an archive, checked; UploadRefused at the first that is not allowed.

    Links must end, within the archive, at a regular file (a link to a directory is refused:
    a snapshot holds files only).
    """
    members = _tar_members(path, kind, limits) if kind in (TAR, TGZ) else _zip_members(path, limits)
    by_name = {m.name: m for m in members}
    for member in members:
        if member.link is not None:
            _resolve_link(member, by_name)
    if not any(m.link is None for m in members):
        raise UploadRefused("the archive holds no file")
    return members


def _resolve_link(member: _Member, by_name: dict[str, _Member]) -> _Member:
    current = member
    for _ in range(MAX_LINK_DEPTH):
        if current.link is None:
            return current
        target = by_name.get(current.link)
        if target is None:
            raise UploadRefused(
                f"member {member.name!r}: a link to {current.link!r}, which is no file of the "
                "archive (links to directories are not supported)"
            )
        current = target
    raise UploadRefused(f"member {member.name!r}: a chain of links too long or circular")


class _Hashing:
    """Reads a stream through while hashing it; at its end notes the content's sha256 under the
    member's name, so a link can reuse its target's blob and a refusal can remove it."""

    def __init__(self, name: str, stream: IO[bytes], blobs: dict[str, str]) -> None:
        self.name = name
        self.stream = stream
        self.blobs = blobs
        self.sha = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        chunk = self.stream.read(size)
        if chunk:
            self.sha.update(chunk)
        else:
            self.blobs[self.name] = self.sha.hexdigest()
        return chunk


def _zip_files(
    path: Path, checked: dict[str, _Member], blobs: dict[str, str]
) -> Iterator[tuple[str, BinaryIO, bool]]:
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            member = checked.get(_safe(info.filename))
            if member is None or member.link is not None or info.is_dir():
                continue
            with archive.open(info) as stream:
                hashing = cast(BinaryIO, _Hashing(member.name, stream, blobs))
                yield member.name, hashing, member.executable


def _tar_files(
    path: Path, kind: str, checked: dict[str, _Member], blobs: dict[str, str]
) -> Iterator[tuple[str, BinaryIO, bool]]:
    with tarfile.open(path, mode="r|gz" if kind == TGZ else "r|") as archive:
        for info in archive:
            member = checked.get(_safe(info.name)) if info.isreg() else None
            stream = archive.extractfile(info) if member is not None else None
            if member is None or stream is None:
                continue
            with stream:
                hashing = cast(BinaryIO, _Hashing(member.name, stream, blobs))
                yield member.name, hashing, member.executable


def _archive_files(
    path: Path, kind: str, members: list[_Member], blobs: dict[str, str], store: StorePaths
) -> Iterator[tuple[str, BinaryIO, bool]]:
    """(name, stream, executable) of every file, in archive order, then of every link (its
    target's blob and mode).

    Fills `blobs` (name → content sha256) as each stream is read to its end.
    """
    checked = {m.name: m for m in members}
    if kind == ZIP:
        yield from _zip_files(path, checked, blobs)
    else:
        yield from _tar_files(path, kind, checked, blobs)
    for member in members:
        if member.link is not None:
            target = _resolve_link(member, checked)
            with store.blob(blobs[target.name]).open("rb") as stream:
                yield member.name, stream, target.executable


def _safe(name: str) -> str:
    try:
        return safe_relpath(name)
    except SnapshotRefused:
        return ""


def store_archive(store: StorePaths, path: Path, kind: str, limits: UploadLimits) -> StoredUpload:
    """Check an archive, then store its files as a snapshot; on any refusal or error the blobs
    this upload added are removed again (a blob another snapshot links to is kept)."""
    members = check_archive(path, kind, limits)
    blobs: dict[str, str] = {}
    try:
        digest, files, size = snapshot_entries(
            store,
            _archive_files(path, kind, members, blobs, store),
            max_bytes=limits.max_unpacked_bytes,
        )
    except BaseException as exc:
        _remove_unlinked(store, set(blobs.values()))
        if isinstance(exc, SnapshotRefused):
            raise UploadRefused(str(exc)) from None
        if isinstance(exc, _UNREADABLE):
            raise UploadRefused(f"the archive cannot be read: {exc}") from None
        raise
    return StoredUpload(digest, files, size)


def _remove_unlinked(store: StorePaths, digests: set[str]) -> None:
    """Remove blobs no snapshot links to (one link: the blob itself)."""
    for sha in digests:
        blob = store.blob(sha)
        with suppress(OSError):
            if blob.stat().st_nlink == 1:
                blob.unlink()


def store_upload(
    store: StorePaths, body: Readable, *, content_type: str, limits: UploadLimits
) -> StoredUpload:
    """Spool a body, check it and store it as a snapshot; the spool file never stays."""
    kind = archive_kind(content_type)
    path = spool(body, directory=store.uploads, limit=limits.max_bytes)
    try:
        return store_archive(store, path, kind, limits)
    finally:
        path.unlink(missing_ok=True)

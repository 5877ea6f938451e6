"""Uploads of snapshots (S15): spooled to disk with a cap, checked whole, then stored.

An upload is a tar (plain or gzip) or zip archive. It is written to a temporary file in the
store's spool directory while counting bytes (never held in memory); beyond the limit it is
refused and the file removed. Before anything is extracted every member is checked
(`runs.services.archive_checks`: paths, links, devices, reserved and unstorable names, member
count, unpacked bytes, decompression bombs), with a message naming the member. Only then are
the files fed to `runs.snapshots.snapshot_entries`, which stores each content once and
hard-links it into the snapshot, while the bytes written are held to the same limits.
Whatever is refused leaves nothing behind: no spool file, no snapshot directory, no blob that
this upload added.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, Protocol, cast

from runs.services.archive_checks import (
    TAR,
    TGZ,
    ZIP,
    Member,
    UnsupportedArchive,
    UploadLimits,
    UploadRefused,
    UploadTooLarge,
    WrittenBytes,
    check_archive,
    open_tar,
    refuse_reserved,
    resolve_link,
)
from runs.snapshots import CHUNK, SnapshotRefused, safe_relpath, snapshot_entries
from simrun_harness.layout import StorePaths

__all__ = [
    "TAR",
    "TGZ",
    "ZIP",
    "UnsupportedArchive",
    "UploadLimits",
    "UploadRefused",
    "UploadTooLarge",
    "check_archive",
    "store_archive",
    "store_upload",
]

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

_UNREADABLE = (tarfile.TarError, zipfile.BadZipFile, gzip.BadGzipFile, EOFError, zlib.error)


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


@dataclass(frozen=True)
class StoredUpload:
    digest: str
    files: int
    bytes: int


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


class _Hashing:
    """Reads a stream through while hashing it and counting what it writes against the
    limits; at its end notes the content's sha256 under the member's name, so a link can reuse
    its target's blob and a refusal can remove it."""

    def __init__(
        self, name: str, stream: IO[bytes], blobs: dict[str, str], written: WrittenBytes
    ) -> None:
        self.name = name
        self.stream = stream
        self.blobs = blobs
        self.written = written
        self.sha = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        chunk = self.stream.read(size)
        if chunk:
            self.written.add(self.name, len(chunk))
            self.sha.update(chunk)
        else:
            self.blobs[self.name] = self.sha.hexdigest()
        return chunk


def _zip_files(
    path: Path, checked: dict[str, Member], blobs: dict[str, str], written: WrittenBytes
) -> Iterator[tuple[str, BinaryIO, bool]]:
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            member = checked.get(_safe(info.filename))
            if member is None or member.link is not None or info.is_dir():
                continue
            with archive.open(info) as stream:
                hashing = cast(BinaryIO, _Hashing(member.name, stream, blobs, written))
                yield member.name, hashing, member.executable


def _tar_files(
    path: Path, kind: str, checked: dict[str, Member], blobs: dict[str, str], written: WrittenBytes
) -> Iterator[tuple[str, BinaryIO, bool]]:
    with open_tar(path, kind) as archive:
        for info in archive:
            member = checked.get(_safe(info.name)) if info.isreg() else None
            stream = archive.extractfile(info) if member is not None else None
            if member is None or stream is None:
                continue
            with stream:
                hashing = cast(BinaryIO, _Hashing(member.name, stream, blobs, written))
                yield member.name, hashing, member.executable


def _archive_files(
    path: Path,
    kind: str,
    members: list[Member],
    blobs: dict[str, str],
    store: StorePaths,
    limits: UploadLimits,
) -> Iterator[tuple[str, BinaryIO, bool]]:
    """(name, stream, executable) of every file, in archive order, then of every link (its
    target's blob and mode).

    Fills `blobs` (name → content sha256) as each stream is read to its end.
    """
    checked = {m.name: m for m in members}
    written = WrittenBytes(limits, path.stat().st_size)
    if kind == ZIP:
        yield from _zip_files(path, checked, blobs, written)
    else:
        yield from _tar_files(path, kind, checked, blobs, written)
    for member in members:
        if member.link is not None:
            target = resolve_link(member, checked)
            with store.blob(blobs[target.name]).open("rb") as stream:
                counted = cast(BinaryIO, _Hashing(member.name, stream, {}, written))
                yield member.name, counted, target.executable


def _safe(name: str) -> str:
    try:
        return safe_relpath(name)
    except SnapshotRefused:
        return ""


def store_archive(store: StorePaths, path: Path, kind: str, limits: UploadLimits) -> StoredUpload:
    """Check an archive, then store its files as a snapshot; on any refusal or error the blobs
    this upload added are removed again (a blob another snapshot links to is kept)."""
    members = check_archive(path, kind, limits)
    refuse_reserved(members)
    blobs: dict[str, str] = {}
    try:
        digest, files, size = snapshot_entries(
            store,
            _archive_files(path, kind, members, blobs, store, limits),
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

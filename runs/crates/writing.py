"""Writing a run's crate: into a directory, or as a zip streamed chunk by chunk.

Every file is read from the store without following links (`simrun_harness.store_reads`) and
hashed as it is written, so the digest in the metadata is the digest of the bytes in the crate;
the metadata file is written last. With `metadata_only`, the files of the store (snapshots,
outputs, logs) are read and hashed but not written: the crate then describes each by its
digest and size without holding its bytes (`runs.crates.metadata`: a local identifier and the
path it had); the files the export makes (the workflow, the environment's project and lock)
are small and always written. A file that is a link (or vanished) when it is read is left out
of the crate and its metadata.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, BinaryIO, Protocol, cast

from runs.crates.metadata import crate_metadata
from runs.crates.record import MadeFile, RunRecord, StoredFile, Written
from runs.crates.validation import METADATA_FILE
from simrun_harness.store_reads import NotInStore, open_file

CHUNK = 256 * 1024


class Sink(Protocol):
    def write(self, path: str, chunks: Iterator[bytes]) -> Iterator[None]:
        """Write a member; yields after each chunk, so a stream can hand its bytes on."""
        ...


def _chunks(stream: BinaryIO) -> Iterator[bytes]:
    with stream:
        while chunk := stream.read(CHUNK):
            yield chunk


class _Digesting:
    """Passes chunks through while counting and hashing them."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks
        self.sha = hashlib.sha256()
        self.size = 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.chunks:
            self.sha.update(chunk)
            self.size += len(chunk)
            yield chunk

    def written(self) -> Written:
        return Written(self.sha.hexdigest(), self.size)


def _without(record: RunRecord, missing: set[str]) -> RunRecord:
    """The record less the stored files that could not be read as regular files."""
    if not missing:
        return record
    from dataclasses import replace

    def keep(files: list[StoredFile]) -> list[StoredFile]:
        return [f for f in files if f.crate_path not in missing]

    return replace(
        record,
        snapshots=[replace(s, files=keep(s.files)) for s in record.snapshots],
        tasks=[replace(t, outputs=keep(t.outputs), logs=keep(t.logs)) for t in record.tasks],
    )


def iter_crate(
    record: RunRecord,
    store_root: Path,
    sink: Sink,
    *,
    metadata_only: bool = False,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Iterator[None]:
    """Write every file of the record, then its metadata, into `sink`, yielding after each
    chunk written (a stream sends what it has then)."""
    written: dict[str, Written] = {}
    missing: set[str] = set()
    for item in record.files():
        if isinstance(item, MadeFile):
            chunks: Iterator[bytes] = iter([item.data])
        else:
            try:
                chunks = _chunks(open_file(store_root, item.store_path))
            except NotInStore:
                missing.add(item.crate_path)
                continue
        digesting = _Digesting(chunks)
        if metadata_only and isinstance(item, StoredFile):
            for _ in digesting:
                pass
        else:
            yield from sink.write(item.crate_path, iter(digesting))
        written[item.crate_path] = digesting.written()
    metadata = crate_metadata(
        _without(record, missing), written, exported_at=now(), metadata_only=metadata_only
    )
    text = json.dumps(metadata, indent=2, sort_keys=True, ensure_ascii=False).encode()
    yield from sink.write(METADATA_FILE, iter([text]))


def write_crate(
    record: RunRecord, target: Path, store_root: Path, *, metadata_only: bool = False
) -> None:
    """The crate as a directory at `target`."""
    for _ in iter_crate(record, store_root, DirectorySink(target), metadata_only=metadata_only):
        pass


class DirectorySink:
    """Files under a directory (made if missing); each written to a temporary name first."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def write(self, path: str, chunks: Iterator[bytes]) -> Iterator[None]:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".part-")
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in chunks:
                    out.write(chunk)
                    yield None
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class _Pipe:
    """A write-only file that keeps what was written until it is taken (no seek, no tell:
    zipfile then writes data descriptors, as a stream needs)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data = b"".join(self.parts)
        self.parts.clear()
        return data


class ZipStream:
    """A zip written into a pipe member by member; `take()` hands on what is written so far."""

    def __init__(self) -> None:
        self.pipe = _Pipe()
        self.archive = zipfile.ZipFile(
            cast(IO[bytes], self.pipe), "w", compression=zipfile.ZIP_DEFLATED
        )

    def write(self, path: str, chunks: Iterator[bytes]) -> Iterator[None]:
        info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        with self.archive.open(info, "w", force_zip64=True) as member:
            for chunk in chunks:
                member.write(chunk)
                yield None

    def close(self) -> None:
        self.archive.close()

    def take(self) -> bytes:
        return self.pipe.take()


def zip_chunks(
    record: RunRecord, store_root: Path, *, metadata_only: bool = False
) -> Iterator[bytes]:
    """The crate as a zip, in chunks, made while it is sent (never whole in memory)."""
    stream = ZipStream()
    for _ in iter_crate(record, store_root, stream, metadata_only=metadata_only):
        if data := stream.take():
            yield data
    stream.close()
    if data := stream.take():
        yield data

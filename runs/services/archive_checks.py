"""The checks of an uploaded archive, member by member, before anything is extracted (S15).

Refused, with a message naming the member: absolute paths and `..`, links pointing outside
the archive or to directories, hard links, devices and fifos, names no file system holds (a
component over 255 bytes), a file and a directory of one name, a member twice; for a
snapshot also the names the store keeps for itself (`.simrun-*`, `refuse_reserved`). Refused
as a whole: more members than SIMRUN_UPLOAD_MAX_FILES (a zip is counted from its central
directory before anything else is read; a tar is read no further than the member over the
limit), more unpacked bytes than SIMRUN_UPLOAD_MAX_UNPACKED_BYTES, and an archive that would
unpack to more than MAX_RATIO times its own size (a decompression bomb: in every format, a
sparse tar member counted at its full size, a link at its target's). The same limits hold
again for the bytes actually written while the files are stored (`WrittenBytes`), whatever
the headers said.
"""

from __future__ import annotations

import gzip
import posixpath
import stat
import struct
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from runs.snapshots import SnapshotRefused, not_reserved, safe_relpath

TAR, TGZ, ZIP = "tar", "tgz", "zip"
MAX_RATIO = 200
"""An archive (or a zip member) unpacking to more than this many times its size is refused ..."""
RATIO_FLOOR = 1024 * 1024
"""... once it unpacks to more than this (small, very compressible files are common)."""
MAX_LINK_DEPTH = 16
_EOCD = b"PK\x05\x06"
_EOCD64_LOCATOR = b"PK\x06\x07"
_CENTRAL = b"PK\x01\x02"


class UploadRefused(ValueError):
    """An upload that cannot become a snapshot; the message says which member and why."""


class UploadTooLarge(UploadRefused):
    """The body is larger than the configured limit (413)."""


class UnsupportedArchive(UploadRefused):
    """Not a tar, tar.gz or zip archive (415)."""


@dataclass(frozen=True)
class UploadLimits:
    max_bytes: int
    max_files: int
    max_unpacked_bytes: int


@dataclass(frozen=True)
class Member:
    name: str
    size: int
    link: str | None = None  # the archive path a symbolic link points to
    executable: bool = False  # the owner's execute bit of a file


def member_name(name: str) -> str:
    """The member's clean relative path; UploadRefused naming it when a snapshot cannot hold it."""
    try:
        return safe_relpath(name)
    except SnapshotRefused as exc:
        raise UploadRefused(f"member {exc}") from None


def refuse_reserved(members: list[Member]) -> None:
    """UploadRefused naming the first member with a name the store keeps for itself in a
    snapshot (`.simrun-*`); a crate of the store holds such names, a snapshot may not."""
    for member in members:
        try:
            not_reserved(member.name)
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


def too_many_files(limits: UploadLimits) -> UploadRefused:
    return UploadRefused(
        f"the archive has more than {limits.max_files} files (SIMRUN_UPLOAD_MAX_FILES)"
    )


def _bomb(name: str, unpacked: int, archive: int) -> UploadRefused:
    return UploadRefused(
        f"member {name!r}: the archive would unpack to more than {unpacked} bytes from "
        f"{archive} (more than {MAX_RATIO}:1), refused as a decompression bomb"
    )


def check_bytes(name: str, unpacked: int, archive: int, limits: UploadLimits) -> None:
    """UploadRefused when `unpacked` bytes (so far) pass the total or the ratio limit."""
    if unpacked > limits.max_unpacked_bytes:
        raise UploadRefused(
            f"member {name!r}: the archive unpacks to more than {limits.max_unpacked_bytes} "
            "bytes (SIMRUN_UPLOAD_MAX_UNPACKED_BYTES)"
        )
    if unpacked > RATIO_FLOOR and unpacked > MAX_RATIO * archive:
        raise _bomb(name, unpacked, archive)


class _Tally:
    """Counts members and unpacked bytes against the limits while the archive is read, and
    keeps the names files and directories take (a file and a directory of one name cannot
    both be stored)."""

    def __init__(self, limits: UploadLimits, archive_size: int) -> None:
        self.limits = limits
        self.archive_size = archive_size
        self.files = 0
        self.bytes = 0
        self.names: set[str] = set()
        self.dirs: set[str] = set()

    def add(self, name: str, size: int) -> None:
        if name in self.names:
            raise UploadRefused(f"member {name!r}: appears twice in the archive")
        if name in self.dirs:
            raise UploadRefused(
                f"member {name!r}: a file where other members make a directory of that name"
            )
        parents = name.split("/")[:-1]
        for end in range(1, len(parents) + 1):
            parent = "/".join(parents[:end])
            if parent in self.names:
                raise UploadRefused(
                    f"member {name!r}: inside {parent!r}, which the archive holds as a file"
                )
            self.dirs.add(parent)
        self.names.add(name)
        self.files += 1
        self.bytes += size
        if self.files > self.limits.max_files:
            raise too_many_files(self.limits)
        check_bytes(name, self.bytes, self.archive_size, self.limits)


def open_tar(path: Path, kind: str) -> tarfile.TarFile:
    """A tar archive read as a stream; a tar.gz through `gzip` (C), three times faster than
    tarfile's own decompressing stream."""
    if kind == TGZ:
        return tarfile.open(fileobj=gzip.open(path, "rb"), mode="r|")
    return tarfile.open(path, mode="r|")


def _tar_size(field: bytes) -> int | None:
    """A header's size field: octal, or base-256 (GNU) when its first bit is set."""
    if field[:1] and field[0] & 0x80:
        return int.from_bytes(field[1:], "big")
    text = field.rstrip(b"\0 ").lstrip(b" ")
    try:
        return int(text or b"0", 8)
    except ValueError:
        return None


def tar_member_count(path: Path, kind: str, stop_after: int) -> int:
    """How many files and links a tar holds, counted up to `stop_after + 1` from the headers
    alone (their data skipped, nothing parsed): tarfile takes about 0.1 ms a member, this a
    few microseconds. Extension headers (GNU long names, pax) are no members; a pax `size`
    is honoured. A header it cannot read ends the count (tarfile then says why)."""
    counted = 0
    with gzip.open(path, "rb") if kind == TGZ else path.open("rb") as stream:
        pax_size: int | None = None
        while counted <= stop_after:
            header = stream.read(512)
            if len(header) < 512 or header == bytes(512):
                break
            kind_flag = header[156:157]
            size = pax_size if pax_size is not None else _tar_size(header[124:136])
            pax_size = None
            if size is None:
                break
            if kind_flag == b"S" and header[482]:  # old GNU sparse: extension blocks follow
                while (block := stream.read(512)) and len(block) == 512 and block[504]:
                    pass
            padded = -(-size // 512) * 512
            if kind_flag == b"x":
                data = stream.read(min(size, 1024 * 1024))
                stream.seek(padded - len(data), 1)
                for record in data.split(b"\n"):  # "<length> <keyword>=<value>"
                    key, _, value = record.partition(b" ")[2].partition(b"=")
                    if key == b"size" and value.isdigit():
                        pax_size = int(value)
                continue
            stream.seek(padded, 1)
            if kind_flag not in (b"L", b"K", b"g", b"5"):
                counted += 1
    return counted


def _tar_members(path: Path, kind: str, limits: UploadLimits) -> list[Member]:
    """Check every member of a tar archive, reading it as a stream (headers before data), so
    a bomb is refused at its header without decompressing what it claims to hold; an archive
    of more members than the limit is refused from its headers first (`tar_member_count`)."""
    tally = _Tally(limits, path.stat().st_size)
    members: list[Member] = []
    try:
        if tar_member_count(path, kind, limits.max_files) > limits.max_files:
            raise too_many_files(limits)
        with open_tar(path, kind) as archive:
            for info in archive:
                if info.isdir():
                    continue
                name = member_name(info.name)
                if info.islnk():
                    raise UploadRefused(f"member {name!r}: hard links are not allowed")
                if info.issym():
                    tally.add(name, 0)
                    members.append(Member(name, 0, _link_target(name, info.linkname)))
                    continue
                if info.ischr() or info.isblk() or info.isfifo() or info.isdev():
                    raise UploadRefused(f"member {name!r}: devices and fifos are not allowed")
                if not info.isreg():
                    raise UploadRefused(f"member {name!r}: unsupported member type")
                tally.add(name, info.size)  # a sparse member's size is its full size
                members.append(Member(name, info.size, executable=bool(info.mode & 0o100)))
    except (tarfile.TarError, EOFError, OSError, zlib.error, gzip.BadGzipFile) as exc:
        raise UploadRefused(f"not a readable {kind} archive: {exc}") from None
    return members


def zip_member_count(path: Path, stop_after: int) -> int:
    """How many entries a zip's central directory holds, counted up to `stop_after + 1`
    without parsing the entries (what `zipfile.ZipFile` does for all of them first); 0 when
    the directory cannot be found (`zipfile` then says why)."""
    with path.open("rb") as handle:
        size = handle.seek(0, 2)
        tail_size = min(size, 22 + 65535)
        handle.seek(size - tail_size)
        tail = handle.read(tail_size)
        at = tail.rfind(_EOCD)
        if at < 0 or len(tail) - at < 22:
            return 0
        end_of_directory = size - tail_size + at
        _, _, _, _, entries, directory_size, _, _ = struct.unpack("<4s4H2LH", tail[at : at + 22])
        locator = tail[at - 20 : at] if at >= 20 else b""
        if locator[:4] == _EOCD64_LOCATOR:
            record = struct.unpack("<4sLQL", locator)[2]
            handle.seek(record)
            zip64 = handle.read(56)
            if zip64[:4] != b"PK\x06\x06" or len(zip64) < 56:
                return 0
            entries, directory_size = struct.unpack("<QQ", zip64[32:48])
            end_of_directory = record
        if entries > stop_after:
            return int(entries)
        handle.seek(max(0, end_of_directory - directory_size))
        counted = 0
        while counted <= stop_after:
            header = handle.read(46)
            if len(header) < 46 or header[:4] != _CENTRAL:
                break
            counted += 1
            name, extra, comment = struct.unpack("<3H", header[28:34])
            handle.seek(name + extra + comment, 1)
        return max(counted, int(entries))


def _zip_members(path: Path, limits: UploadLimits) -> list[Member]:
    if zip_member_count(path, limits.max_files) > limits.max_files:
        raise too_many_files(limits)
    tally = _Tally(limits, path.stat().st_size)
    members: list[Member] = []
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.is_dir():
                    continue
                name = member_name(info.filename)
                mode = info.external_attr >> 16
                if info.flag_bits & 0x1:
                    raise UploadRefused(f"member {name!r}: encrypted members are not allowed")
                if stat.S_ISLNK(mode):
                    if info.file_size > 4096:
                        raise UploadRefused(f"member {name!r}: a link target is too long")
                    target = archive.read(info).decode("utf-8", errors="replace")
                    tally.add(name, 0)
                    members.append(Member(name, 0, _link_target(name, target)))
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
                members.append(Member(name, info.file_size, executable=bool(mode & 0o100)))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
        raise UploadRefused(f"not a readable zip archive: {exc}") from None
    return members


def check_archive(path: Path, kind: str, limits: UploadLimits) -> list[Member]:
    """Every member of an archive, checked; UploadRefused at the first that is not allowed.

    Links must end, within the archive, at a regular file (a link to a directory is refused:
    a snapshot holds files only).
    """
    members = _tar_members(path, kind, limits) if kind in (TAR, TGZ) else _zip_members(path, limits)
    by_name = {m.name: m for m in members}
    archive_size = path.stat().st_size
    unpacked = sum(m.size for m in members)
    for member in members:
        if member.link is not None:
            unpacked += resolve_link(member, by_name).size  # stored as a copy of its target
            check_bytes(member.name, unpacked, archive_size, limits)
    if not any(m.link is None for m in members):
        raise UploadRefused("the archive holds no file")
    return members


def resolve_link(member: Member, by_name: dict[str, Member]) -> Member:
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


class WrittenBytes:
    """The bytes written while an archive's files are stored, held to the same limits as its
    headers (total and ratio): what counts is what would land on disk."""

    def __init__(self, limits: UploadLimits, archive_size: int) -> None:
        self.limits = limits
        self.archive_size = archive_size
        self.bytes = 0

    def add(self, name: str, size: int) -> None:
        self.bytes += size
        check_bytes(name, self.bytes, self.archive_size, self.limits)

"""Archives built in memory for upload tests, benign and malicious."""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Iterable


def tar_member(
    name: str,
    data: bytes = b"",
    *,
    kind: bytes = tarfile.REGTYPE,
    link: str = "",
    mode: int = 0o644,
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.linkname = link
    info.mode = mode
    return info, data


def tar_of(members: Iterable[tuple[tarfile.TarInfo, bytes]], *, gz: bool = False) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if gz else "w") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
    return buffer.getvalue()


def tar_files(files: dict[str, bytes], *, gz: bool = False) -> bytes:
    return tar_of((tar_member(name, data) for name, data in files.items()), gz=gz)


def zip_of(
    files: dict[str, bytes],
    *,
    links: dict[str, str] | None = None,
    executable: Iterable[str] = (),
) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o100755 if name in executable else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16
            archive.writestr(info, target)
    return buffer.getvalue()


def sparse_tar(size: int) -> bytes:
    """A plain tar of one GNU sparse member standing for `size` bytes, one block of data."""
    info = tarfile.TarInfo("model/sparse.bin")
    info.type = tarfile.GNUTYPE_SPARSE
    info.size = 512  # the data the archive holds
    header = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    # the old GNU header: the sparse map at 386 (offset, length; 12 octal digits each), then
    # `isextended` at 482 and the real size at 483
    header[386:398] = f"{0:011o}\0".encode()
    header[398:410] = f"{512:011o}\0".encode()
    header[483:495] = f"{size:011o}\0".encode()
    header[148:156] = b"        "
    header[148:156] = f"{sum(header[:512]):06o}\0 ".encode()
    return bytes(header) + b"x" * 512 + bytes(1024 * 8)


def many_members_zip(members: int, size: int) -> bytes:
    """A zip of `members` distinct members of `size` bytes each, every one compressed well."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for i in range(members):
            archive.writestr(f"model/m{i:04d}.bin", f"{i:08d}".encode() + bytes(size - 8))
    return buffer.getvalue()


def many_members_tar(members: int) -> bytes:
    return tar_of(tar_member(f"model/f{i}", b"x") for i in range(members))

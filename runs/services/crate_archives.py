"""A crate's zip, unpacked only after the upload checks passed (runs/services/uploads.py).

The checks of snapshot uploads apply as they are (absolute paths, `..`, devices, encrypted
members, too many members or bytes, a member compressed suspiciously well); a crate may hold no
link at all, not even one inside it: its metadata describes files, and a link member could only
stand in for one. Each file is then written while counting what it unpacks to, so a member
whose data is longer than its header says is cut and refused. Nothing of Django: the command
line validates a crate with it before any service is involved.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

from runs.services.uploads import ZIP, UploadLimits, UploadRefused, check_archive

CHUNK = 1024 * 1024


def unpack_crate(archive: Path, target: Path, limits: UploadLimits) -> Path:
    """The crate's files under `target` (made); UploadRefused naming the member at the first
    that is not allowed, with nothing left under `target`."""
    if not zipfile.is_zipfile(archive):
        raise UploadRefused("not a zip archive (a crate is a zip or a directory)")
    members = check_archive(archive, ZIP, limits)
    links = [m.name for m in members if m.link is not None]
    if links:
        raise UploadRefused(f"member {links[0]!r}: a link; a crate holds files only")
    wanted = {m.name: m.size for m in members}
    target.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(archive) as zipped:
            for info in zipped.infolist():
                name = info.filename.rstrip("/")
                if info.is_dir() or name not in wanted:
                    continue
                _extract(zipped, info, name, target / name, wanted[name])
    except BaseException as exc:
        shutil.rmtree(target, ignore_errors=True)
        if isinstance(exc, (zipfile.BadZipFile, OSError, EOFError)):
            raise UploadRefused(f"the crate's zip cannot be read: {exc}") from None
        raise
    return target


def _extract(
    zipped: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, dest: Path, size: int
) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with zipped.open(info) as stream, dest.open("xb") as out:
        while chunk := stream.read(CHUNK):
            written += len(chunk)
            if written > size:
                raise UploadRefused(
                    f"member {name!r}: unpacks to more than the {size} bytes it declares"
                )
            out.write(chunk)
    os.chmod(dest, 0o644)

"""Crates as files for the tests of running them again: a run's crate as zip members, changed
one member at a time, and a fresh installation (an empty store, no rows) to bring it into."""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

from pytest_django import Settings

from runs.crates.validation import METADATA_FILE
from runs.models import Run, Snapshot
from runs.services.crates import export_to
from runs.services.uploads import UploadLimits

LIMITS = UploadLimits(max_bytes=64 * 1024**2, max_files=1000, max_unpacked_bytes=256 * 1024**2)


def crate_members(run: Run, tmp_path: Path) -> dict[str, bytes]:
    """The members of the run's exported crate, by name."""
    target = export_to(run_id=run.pk, target=tmp_path / f"export-{run.pk}.zip")
    with zipfile.ZipFile(target) as zipped:
        return {name: zipped.read(name) for name in zipped.namelist()}


def zipped(members: dict[str, bytes], *, links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16
            archive.writestr(info, target)
    return buffer.getvalue()


def written(data: bytes, where: Path) -> Path:
    where.write_bytes(data)
    return where


def fresh_installation(settings: Settings, tmp_path: Path) -> Path:
    """Another installation: a new, empty run store and no run or snapshot rows (the
    identities stay: someone must submit). Its store."""
    Run.objects.all().delete()
    Snapshot.objects.all().delete()
    root = tmp_path / "another-store"
    root.mkdir()
    settings.SIMRUN_STORE = root
    return root


@dataclass(frozen=True)
class Installation:
    """What a refused crate must leave as it was: rows and every file of the store."""

    runs: int
    snapshots: int
    files: frozenset[str]

    @classmethod
    def now(cls, root: Path) -> Installation:
        """Every file of the store, and every snapshot's and run's folder (the folders that
        hold them, made once, do not count)."""
        files = {
            os.path.relpath(os.path.join(folder, name), root)
            for folder, _, names in os.walk(root)
            for name in names
        }
        for kind in ("snapshots", "runs"):
            if (root / kind).is_dir():
                files |= {f"{kind}/{name}/" for name in os.listdir(root / kind)}
        return cls(Run.objects.count(), Snapshot.objects.count(), frozenset(files))


def rewrite_digest(members: dict[str, bytes], name: str, data: bytes) -> None:
    """Put `data` in as member `name` and make the metadata agree with it (as someone who
    forges a crate would)."""
    members[name] = data
    metadata = json.loads(members[METADATA_FILE])
    for entity in metadata["@graph"]:
        if entity["@id"] == name:
            entity["sha256"] = hashlib.sha256(data).hexdigest()
            entity["contentSize"] = str(len(data))
    members[METADATA_FILE] = json.dumps(metadata).encode()

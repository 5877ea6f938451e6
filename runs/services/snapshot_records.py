"""Snapshot records: an uploaded snapshot, or one a client wrote into a mounted store.

The files are immutable and named by their digest, so a record is made once per digest; a
second upload of the same sources returns the first record.
"""

from __future__ import annotations

import json
from typing import Any

from runs.models import Identity, Snapshot
from runs.snapshots import MANIFEST, MANIFEST_MAX_BYTES, Provenance, SnapshotRefused
from runs.store import store, store_root
from simrun_harness import store_reads


def record_snapshot(
    *,
    digest: str,
    files: int,
    size: int,
    provenance: Provenance,
    name: str = "",
    identity: Identity,
) -> tuple[Snapshot, bool]:
    """The record of a stored snapshot, made now (True) or found (False)."""
    return Snapshot.objects.get_or_create(
        digest=digest,
        defaults={
            "name": name,
            "source_path": provenance.source_path,
            "git_remote": provenance.git_remote,
            "git_commit": provenance.git_commit,
            "git_dirty": provenance.git_dirty,
            "files": files,
            "bytes": size,
            "created_by": identity,
        },
    )


class SnapshotNotInStore(SnapshotRefused):
    """No snapshot of this digest (or no manifest of it) in the run store."""


def register_stored_snapshot(
    *, digest: str, provenance: Provenance, name: str = "", identity: Identity
) -> tuple[Snapshot, bool]:
    """Record a snapshot a client wrote into the store itself (SIMRUN_STORE mounted).

    Raises SnapshotRefused when `snapshots/<digest>/` or its manifest is missing.
    """
    try:
        folder = store().snapshot(digest)
    except ValueError as exc:
        raise SnapshotRefused(str(exc)) from None
    root = store_root()
    try:
        manifest = json.loads(
            store_reads.read_bytes(root, folder / MANIFEST, limit=MANIFEST_MAX_BYTES)
        )
    except (OSError, ValueError):
        raise SnapshotNotInStore(
            f"snapshot {digest!r} is not in the run store (write it there first, or upload it)"
        ) from None
    size = 0
    entries: list[Any] = manifest if isinstance(manifest, list) else [None]
    for entry in entries:
        try:
            size += store_reads.file_stat(root, folder / entry[0]).st_size
        except (OSError, IndexError, TypeError):
            raise SnapshotRefused(f"snapshot {digest!r} is incomplete in the run store") from None
    return record_snapshot(
        digest=digest,
        files=len(manifest),
        size=size,
        provenance=provenance,
        name=name,
        identity=identity,
    )

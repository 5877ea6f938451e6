"""A run made again from a Workflow Run RO-Crate (docs/provenance.md): `submit --from-crate`.

The crate's zip is unpacked with the checks of uploads (`crate_archives`), read and checked
whole (`runs.crates.reading`: the run profiles, every file's digest, the snapshots' manifests),
its task types looked up here; only then are its snapshots stored (each file's content once,
as an upload's) and the run created as any other (`create_run`), with the crate named as its
origin and the crate's constraints kept for its environment. A crate needs nothing of the
installation that made it: no run id, no path, no database row.

Whatever is refused changes nothing: the snapshots, blobs and rows this call added are removed
again and the run's directory with them (a snapshot or blob that was here before is kept).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from runs import kept_environment
from runs.crates.reading import CrateRefused, CrateRun, CrateSnapshot, read_crate
from runs.environments import SERVICE_ENVIRONMENT, model_environment
from runs.local_packages import LocalPackageRefused
from runs.models import Identity, Run, Snapshot
from runs.plans import Node
from runs.plugin_metadata import environment_at, service_environment
from runs.services.crate_archives import unpack_crate
from runs.services.snapshot_records import record_snapshot
from runs.services.submission import create_run
from runs.services.uploads import UploadLimits
from runs.snapshots import Provenance, SnapshotRefused, snapshot_entries
from runs.store import local_package_rules, store
from runs.task_types import COMMAND, Types, registry
from runs.validation import load_data
from runs.workflow import SplitMode

__all__ = ["CrateRefused", "submit_crate"]


@dataclass
class _Added:
    """What this submission added to the store and the database, to take back on refusal."""

    snapshots: list[str] = field(default_factory=list)  # digests of folders made here
    blobs: set[str] = field(default_factory=set)  # contents that were not in the store
    rows: list[int] = field(default_factory=list)  # Snapshot rows made here
    run: str | None = None

    def undo(self) -> None:
        paths = store()
        if self.run is not None:
            shutil.rmtree(paths.run(self.run).root, ignore_errors=True)
        Snapshot.objects.filter(pk__in=self.rows).delete()
        for digest in self.snapshots:
            shutil.rmtree(paths.snapshot(digest), ignore_errors=True)
        for sha in self.blobs:
            for executable in (True, False):
                blob = paths.blob(sha, executable=executable)
                with suppress(OSError):
                    if blob.stat().st_nlink == 1:
                        blob.unlink()


@contextmanager
def _taken_back_on_failure() -> Iterator[_Added]:
    added = _Added()
    try:
        yield added
    except BaseException:
        added.undo()
        raise


def _types(crate: CrateRun, root: Path) -> Types:
    """The task types the crate's run is checked with here: those of the environment its
    model would run in (resolved under the crate's constraints) once it is built here, else
    the service's own, as `create_run` takes them."""
    if not crate.snapshots:
        return registry()
    model = root / "snapshots" / crate.snapshots[0].digest
    try:
        ref, _ = model_environment(
            model, constraints=crate.constraints, local_rules=local_package_rules()
        )
    except LocalPackageRefused as exc:
        raise CrateRefused(f"the model's {exc}") from None
    if ref == SERVICE_ENVIRONMENT:
        return registry()
    return registry(environment_at(store().environments, ref) or service_environment())


def _check_types(crate: CrateRun, types: Types) -> None:
    """CrateRefused naming the first task type not installed here, its package and version as
    the crate records them, and how to install it."""
    installed = set(types.plugins()) | {COMMAND}
    for task in crate.workflow.get("tasks") or []:
        name = task.get("type") if isinstance(task, dict) else None
        if not isinstance(name, str) or name in installed:
            continue
        tool = crate.tools.get(name)
        source = (
            f"the crate's run used it from the package {tool.package} {tool.version}"
            if tool is not None and tool.package
            else "the crate does not say which package it came from"
        )
        package = tool.package if tool is not None and tool.package else "the plugin"
        raise CrateRefused(
            f"task {task.get('id')!r}: the task type {name!r} is not installed here ({source}); "
            f"install {package} where the service runs (`simrun plugin install DIR` for its "
            "directory) and name it in the model's pyproject.toml, then submit the crate again"
        )


def _store_snapshot(snapshot: CrateSnapshot, identity: Identity, added: _Added) -> str:
    paths = store()
    existed = paths.snapshot(snapshot.digest).exists()
    for file in snapshot.files:
        if not paths.blob(file.sha256).exists():
            added.blobs.add(file.sha256)
    streams = []
    try:
        for file in snapshot.files:
            streams.append((file.path, file.source.open("rb"), file.executable))
        digest, count, size = snapshot_entries(paths, streams)
    except SnapshotRefused as exc:
        raise CrateRefused(f"snapshot {snapshot.digest}: {exc}") from None
    finally:
        for _, stream, _ in streams:
            stream.close()
    if not existed:
        added.snapshots.append(digest)
    if digest != snapshot.digest:  # read_crate checked the manifest: a store that disagrees
        raise CrateRefused(f"snapshot {snapshot.digest}: stored as {digest}")
    row, created = record_snapshot(
        digest=digest,
        files=count,
        size=size,
        provenance=Provenance(
            source_path="",
            git_remote=snapshot.git_remote[:1024],
            git_commit=snapshot.git_commit[:64],
            git_dirty=snapshot.git_dirty,
        ),
        name=snapshot.name[:255],
        identity=identity,
    )
    if created:
        added.rows.append(row.pk)
    return digest


def submit_crate(
    *,
    identity: Identity,
    archive: Path,
    limits: UploadLimits,
    group: str = "",
    split: SplitMode | None = None,
    reuse: bool = False,
    resume_from: str | None = None,
    idempotency_key: str | None = None,
    nodes: list[Node] | None = None,
) -> tuple[Run, bool]:
    """Make the run a crate's zip records again and submit it, `submitting`; the run and
    whether it was made now (as `create_run`, which plans it on the backend's nodes, or on
    `nodes`).

    `reuse` is off by default: a re-run computes every unit, which is what it is for.
    Raises UploadRefused (the zip), CrateUnreadable or CrateRefused (the crate), and what
    `create_run` raises (WorkflowInvalid, SubmissionRefused, PlanRefused); each changes nothing.
    """
    if idempotency_key:
        existing = Run.objects.filter(owner=identity, idempotency_key=idempotency_key).first()
        if existing is not None:
            return existing, False  # the crate is not read again for a retried request
    paths = store()
    paths.uploads.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=paths.uploads, prefix=".crate-") as tmp:
        root = unpack_crate(archive, Path(tmp) / "crate", limits)
        crate = read_crate(root)
        types = _types(crate, root)
        _check_types(crate, types)
        load_data(crate.workflow, types=types)  # an invalid workflow stores nothing
        with _taken_back_on_failure() as added:
            sources = [_store_snapshot(s, identity, added) for s in crate.snapshots]
            with transaction.atomic():  # the submission is enqueued once all of it is written
                run, created = create_run(
                    identity=identity,
                    workflow=crate.workflow,
                    sources=sources,
                    nodes=nodes,
                    group=group,
                    split=split,
                    reuse=reuse,
                    resume_from=resume_from,
                    idempotency_key=idempotency_key,
                )
                added.run = run.pk
                Run.objects.filter(pk=run.pk).update(from_crate=crate.lineage)
                if crate.constraints is not None:
                    kept_environment.keep(run.pk, {"constraints.txt": crate.constraints})
    run.refresh_from_db()
    return run, created

"""Exporting a run as a Workflow Run RO-Crate (docs/provenance.md): counted on the run's row.

The crate is made while it is sent (a zip in chunks) or written into a directory; what it holds
comes from `runs.selectors.crates.run_record`, read without following links.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.db.models import F

from runs.crates.writing import write_crate, zip_chunks
from runs.models import Run
from runs.refusals import RunNotFound
from runs.selectors.crates import RunNotExportable, run_record

__all__ = ["RunNotExportable", "export_to", "exported_zip"]


def _run(run_id: str) -> Run:
    run = Run.objects.select_related("owner__acts_for").filter(pk=run_id).first()
    if run is None:
        raise RunNotFound(f"no run {run_id!r}")
    return run


def _counted(run: Run) -> None:
    Run.objects.filter(pk=run.pk).update(exports=F("exports") + 1)


def exported_zip(*, run_id: str, metadata_only: bool = False) -> Iterator[bytes]:
    """The crate of an ended run as zip chunks, counted as one export. RunNotFound,
    RunNotExportable (a live run) before the first chunk."""
    run = _run(run_id)
    record = run_record(run)
    _counted(run)
    return zip_chunks(record, Path(settings.SIMRUN_STORE), metadata_only=metadata_only)


def export_to(*, run_id: str, target: Path, metadata_only: bool = False) -> Path:
    """The crate of an ended run written to `target`: a zip file when its name ends in .zip,
    else a directory (made; an existing one must be empty). Counted as one export."""
    run = _run(run_id)
    record = run_record(run)
    store = Path(settings.SIMRUN_STORE)
    if target.suffix.lower() == ".zip":
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.part")
        with partial.open("wb") as out:
            for chunk in zip_chunks(record, store, metadata_only=metadata_only):
                out.write(chunk)
        zipfile.ZipFile(partial).close()  # a whole zip, or BadZipFile
        partial.replace(target)
    else:
        if target.exists() and any(target.iterdir()):
            raise RunNotExportable(f"{target}: not empty; give a new or empty directory")
        write_crate(record, target, store, metadata_only=metadata_only)
    _counted(run)
    return target

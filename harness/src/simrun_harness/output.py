"""Publishing a task's output: all of it, or nothing that looks whole.

A merge (or an unsplit run) writes into a private directory beside `out/`; when it is
complete the directory is renamed to `out/` and only then the marker `out/.simrun-merged` is
written (itself through a temporary name). A merge killed half way leaves a private directory
and no marker; the next merge removes it and starts again. A task whose marker exists is not
merged again, so a repeated merge is harmless.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from simrun_harness.layout import MERGE_MARKER, TaskPaths

PARTIAL_PREFIX = ".out-partial-"
STALE_PREFIX = ".out-stale-"


def is_published(paths: TaskPaths) -> bool:
    """Whether `out/` has its marker, by listing directories (no cached negative lookup)."""
    try:
        if paths.out.name not in os.listdir(paths.root):
            return False
        return MERGE_MARKER in os.listdir(paths.out)
    except FileNotFoundError:
        return False


def prepare_output(paths: TaskPaths, token: str) -> Path:
    """A fresh private output directory; removes what earlier killed attempts left."""
    for name in os.listdir(paths.root):
        if name.startswith((PARTIAL_PREFIX, STALE_PREFIX)):
            shutil.rmtree(paths.root / name, ignore_errors=True)
    tmp = paths.root / f"{PARTIAL_PREFIX}{token}-{os.getpid()}"
    tmp.mkdir()
    return tmp


def publish_output(paths: TaskPaths, tmp: Path, info: dict[str, object]) -> None:
    """Move a complete output into `out/`, then write the marker last."""
    if paths.out.exists():  # an output without its marker: never trusted, replaced
        stale = paths.root / f"{STALE_PREFIX}{os.getpid()}"
        os.rename(paths.out, stale)
        shutil.rmtree(stale, ignore_errors=True)
    os.rename(tmp, paths.out)
    marker_tmp = paths.out / f".{MERGE_MARKER}.tmp"
    record = {"published_at": datetime.now(UTC).isoformat(), **info}
    marker_tmp.write_text(json.dumps(record) + "\n")
    os.rename(marker_tmp, paths.merge_marker)

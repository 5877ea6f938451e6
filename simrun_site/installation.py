"""Where this machine's simrun lives: its data directory, found the way git finds `.git/`.

`SIMRUN_DATA_DIR` names it; without it, the nearest `.simrun/` in the current directory or
above is used, so `simrun` works from anywhere inside a project that has one. Only the
commands that install (`simrun demo`, `simrun serve`) make a new one, in the current
directory; every other command refuses rather than start an empty database (`runs/cli/main.py`).
"""

from __future__ import annotations

import os
from pathlib import Path

MARK = ".simrun"
VARIABLE = "SIMRUN_DATA_DIR"


def nearest(start: Path) -> Path | None:
    """The `.simrun/` directory in `start` or the closest of its parents, if there is one."""
    for folder in (start, *start.parents):
        candidate = folder / MARK
        if candidate.is_dir():
            return candidate
    return None


def configured() -> bool:
    """Whether the environment names the data directory (directly or through a file)."""
    return bool(os.environ.get(VARIABLE, "").strip() or os.environ.get(f"{VARIABLE}_FILE"))


def default_data_dir(cwd: Path) -> Path:
    """Without `SIMRUN_DATA_DIR`: the nearest `.simrun/`, else the one an install makes here."""
    found = nearest(cwd.resolve())
    return found if found is not None else (cwd / MARK).resolve()


def missing_message(cwd: Path) -> str:
    """What a command that needs an installation says when there is none."""
    return (
        f"no simrun installation here ({cwd} has no {MARK}/ in it or above it); run from a "
        f"directory inside the one where `simrun demo` or `simrun serve` made {MARK}/, "
        f"or set {VARIABLE}"
    )


def find(cwd: Path) -> Path | None:
    """The data directory as the settings find it (`SIMRUN_DATA_DIR`, through a file too, else
    the nearest `.simrun/`), without setting anything up; None when there is none (or its
    variable cannot be read: the settings then say what is wrong)."""
    value = os.environ.get(VARIABLE, "").strip()
    if not value and os.environ.get(f"{VARIABLE}_FILE"):
        try:
            value = Path(os.environ[f"{VARIABLE}_FILE"]).read_text().strip()
        except OSError:
            return None
    if value:
        return Path(value).expanduser().resolve()
    return nearest(cwd.resolve())

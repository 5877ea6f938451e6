"""Which code a plugin's type runs in an environment, by its files, without importing it.

The service and a plugin host in a model's environment (an image on a cluster) both name a
type's copy by `code_digest` of the files its entry point's top-level package is imported
from: the same files give the same digest wherever they lie, so two copies are compared
without moving either (`identify`, a plugin host's `identify` question).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from simrun_harness.plugin import ENTRY_POINT_GROUP

_SKIPPED = {"__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


def code_digest(place: Path) -> str:
    """A digest of a module file or a package directory's files (bytecode caches left out),
    by relative path and content."""
    digest = hashlib.sha256()
    if place.is_file():
        files = [(place.name, place)]
    else:
        files = []
        for folder, dirs, names in os.walk(place):
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED)
            for name in sorted(names):
                file = Path(folder) / name
                if name.endswith((".pyc", ".pyo")) or not file.is_file():
                    continue
                files.append((file.relative_to(place).as_posix(), file))
    for rel, file in files:
        try:
            content = hashlib.sha256(file.read_bytes()).hexdigest()
        except OSError:
            continue
        digest.update(f"{rel}\0{content}\n".encode())
    return digest.hexdigest()[:32]


def module_file_place(module: str) -> Path | None:
    """Where the top-level package (or module) of `module` is imported from here, found
    without running it."""
    try:
        spec = importlib.util.find_spec(module.split(".")[0])
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("built-in", "frozen", "namespace"):
        origin = Path(spec.origin)
        return origin.parent if origin.name == "__init__.py" else origin
    locations = list(spec.submodule_search_locations or [])
    return Path(locations[0]) if locations else None


def identify(name: str) -> dict[str, Any]:
    """The type `name`'s plugin here: its package, version, entry point and `code_digest`;
    `{"ok": false, "kind": "type"}` when no entry point has that name."""
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=name):
        place = module_file_place(ep.value.split(":", 1)[0])
        dist = ep.dist
        return {
            "ok": True,
            "package": dist.metadata["Name"] if dist is not None else "?",
            "version": dist.version if dist is not None else "?",
            "value": ep.value,
            "digest": code_digest(place) if place is not None else "",
        }
    return {"ok": False, "kind": "type", "error": f"no plugin here has a type {name!r}"}

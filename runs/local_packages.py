"""The local packages a model's environment installs, and the digest of their contents.

A model's `pyproject.toml` may name packages by a local path instead of a version: a
`name @ file:///abs/path` dependency, or a `[tool.uv.sources]` entry with a `path` (relative to
the model directory, possibly `editable`). Their version says nothing about their code, so
the environment's identity includes the digest of each one's files: editing a plugin gives
the next run a new environment with the new code, never the old one from a cache.

A relative path must stay inside the model directory, because the environment is built from
the model's snapshot, which holds only that directory. No Django here.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from runs.snapshots import SKIPPED_DIRS

PROJECT_FILE = "pyproject.toml"
# build artefacts of a package are not its code
_SKIPPED = SKIPPED_DIRS | {"build", "dist", ".ruff_cache", ".tox", ".nox"}


class LocalPackageRefused(ValueError):
    """A local path the environment cannot install; the message names it and says why."""


@dataclass(frozen=True)
class LocalPackage:
    """A package installed from a local path: its name, where it is, its files' digest."""

    name: str
    path: Path
    digest: str
    written: str = ""  # how the pyproject.toml names it: a file:// URL or a path

    @property
    def relative(self) -> bool:
        """Named by a path relative to the model directory (else by an absolute one)."""
        return not (self.written.startswith("file:") or Path(self.written).is_absolute())

    def identity(self) -> dict[str, str]:
        """What names this package in an environment's identity (not where it lies)."""
        return {"name": self.name, "digest": self.digest}


def package_files(path: Path) -> Iterator[Path]:
    """The files of a package directory in a stable order, without caches, version-control
    and build directories, and without symbolic links."""
    for folder, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED and not d.endswith(".egg-info"))
        for name in sorted(files):
            file = Path(folder) / name
            if not file.is_symlink() and file.is_file():
                yield file


def tree_digest(path: Path) -> str:
    """SHA-256 of a directory's files (relative path, executable bit, content), skipping
    caches, version-control and build directories; of the bytes for a single file."""
    digest = hashlib.sha256()
    if path.is_file():
        digest.update(path.read_bytes())
        return digest.hexdigest()
    for file in package_files(path):
        rel = file.relative_to(path).as_posix().encode()
        content = hashlib.sha256(file.read_bytes()).digest()
        executable = b"x" if os.access(file, os.X_OK) else b"-"
        digest.update(len(rel).to_bytes(8, "big") + rel + executable + content)
    return digest.hexdigest()


def _name(requirement: str) -> str:
    return requirement.split("@", 1)[0].split("[", 1)[0].strip()


def _declared_paths(project: dict[str, Any], model_dir: Path) -> dict[str, tuple[str, Path]]:
    """name → (how it is written, the path it points at) of every local dependency."""
    found: dict[str, tuple[str, Path]] = {}
    for requirement in project.get("project", {}).get("dependencies", []):
        if "@" in requirement and "file://" in requirement:
            url = requirement.split("@", 1)[1].split(";", 1)[0].strip()
            found[_name(requirement)] = (url, Path(unquote(urlparse(url).path)))
    sources = project.get("tool", {}).get("uv", {}).get("sources", {})
    for name, source in sources.items():
        for entry in source if isinstance(source, list) else [source]:
            if isinstance(entry, dict) and "path" in entry:
                written = str(entry["path"])
                target = Path(written)
                if not target.is_absolute():
                    target = model_dir / target
                    inside = target.resolve().is_relative_to(model_dir.resolve())
                    if not inside:
                        raise LocalPackageRefused(
                            f"{PROJECT_FILE}: [tool.uv.sources] {name} = {{ path = {written!r} }}"
                            " leaves the model directory; the environment is built from the"
                            " model's snapshot, so put the package inside the model directory"
                            " or give an absolute path"
                        )
                found[name] = (written, target)
    return found


def local_packages(model_dir: Path) -> list[LocalPackage]:
    """The local packages of a model's `pyproject.toml`, by name, each with its digest.

    Raises LocalPackageRefused for a path that is missing or leaves the model directory.
    """
    project_file = model_dir / PROJECT_FILE
    if not project_file.is_file():
        return []
    try:
        project = tomllib.loads(project_file.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LocalPackageRefused(f"{PROJECT_FILE}: not valid TOML: {exc}") from None
    packages = []
    for name, (written, path) in sorted(_declared_paths(project, model_dir).items()):
        if not path.exists():
            raise LocalPackageRefused(
                f"{PROJECT_FILE}: the local package {name} ({written}) does not exist"
            )
        packages.append(
            LocalPackage(name=name, path=path.resolve(), digest=tree_digest(path), written=written)
        )
    return packages


def identity_text(packages: list[LocalPackage]) -> bytes:
    """The local packages' part of an environment's identity, as stable bytes."""
    return json.dumps([p.identity() for p in packages], sort_keys=True).encode()

"""The local packages a model's environment installs, and the digest of their contents.

A model's `pyproject.toml` may name packages by a local path instead of a version: a
`name @ file:///abs/path` dependency, or a `[tool.uv.sources]` entry with a `path` (relative to
the model directory, possibly `editable`). Their version says nothing about their code, so
the environment's identity includes the digest of each one's files: editing a plugin gives
the next run a new environment with the new code, never the old one from a cache.

The model is the submitter's, and the service reads these files (to name the environment, and
on a cluster to pack them into the image's build): a package lies inside the model's
snapshot, named by a relative path that stays in it, or inside a directory the operator
allows (`LocalPackageRules.roots`, SIMRUN_LOCAL_PACKAGE_ROOTS), named by its absolute path.
Nothing else is read: not a `..` out of either, not a sources entry no dependency uses. Every
file is read below its root without following a link (`simrun_harness.store_reads`), within
limits of entries and bytes. No Django here.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import posixpath
import re
import stat
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO
from urllib.parse import unquote, urlparse

from runs.snapshots import SKIPPED_DIRS
from simrun_harness import store_reads

PROJECT_FILE = "pyproject.toml"
PROJECT_MAX_BYTES = 16 * 1024 * 1024
"""The largest pyproject.toml or uv.lock of a model read for its environment."""
MAX_DEPTH = 64
"""The deepest directory of a local package read (a package's code is never that deep)."""
# build artefacts of a package are not its code
_SKIPPED = SKIPPED_DIRS | {"build", "dist", ".ruff_cache", ".tox", ".nox"}
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXECUTABLE = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


class LocalPackageRefused(ValueError):
    """A local path the environment cannot install; the message names it and says why."""


@dataclass(frozen=True)
class LocalPackageRules:
    """Where a model's local packages may lie besides its snapshot, and how large each is."""

    roots: tuple[Path, ...] = ()
    """Directories the operator allows (SIMRUN_LOCAL_PACKAGE_ROOTS), absolute."""
    max_entries: int = 10_000
    """Files and directories of one package looked at (SIMRUN_UPLOAD_MAX_FILES)."""
    max_bytes: int = 256 * 1024 * 1024
    """Bytes of one package read (SIMRUN_LOCAL_PACKAGE_MAX_BYTES)."""

    def allowed(self) -> str:
        names = ", ".join(str(root) for root in self.roots) or "none"
        return f"SIMRUN_LOCAL_PACKAGE_ROOTS: {names}"


@dataclass(frozen=True)
class LocalPackage:
    """A package installed from a local path: its name, where it is, its files' digest."""

    name: str
    path: Path
    digest: str
    written: str = ""  # how the pyproject.toml names it: a file:// URL or a path
    root: Path = field(default=Path("/"), compare=False)
    """The directory it is read below, no link followed: the store, or an allowed root."""

    @property
    def relative(self) -> bool:
        """Named by a path relative to the model directory (else by an absolute one)."""
        written = self.written
        if written.lower().startswith("file:"):
            written = unquote(urlparse(written).path)
        return not PurePosixPath(written).is_absolute()

    def identity(self) -> dict[str, str]:
        """What names this package in an environment's identity (not where it lies)."""
        return {"name": self.name, "digest": self.digest}


@dataclass(frozen=True)
class PackageFile:
    """One regular file of a local package, as read."""

    path: str  # relative to the package, with `/`; "" for a package that is one file
    data: bytes
    executable: bool


def package_files(path: Path) -> Iterator[Path]:
    """The files of a trusted package directory (the service's own, an installed plugin) in
    a stable order, without caches, version-control and build directories, and without
    symbolic links."""
    for folder, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not _skipped(d))
        for name in sorted(files):
            file = Path(folder) / name
            if not file.is_symlink() and file.is_file():
                yield file


def _skipped(directory: str) -> bool:
    return directory in _SKIPPED or directory.endswith(".egg-info")


def files_digest(files: Iterable[PackageFile]) -> str:
    """SHA-256 of a package's files (relative path, executable bit, content); of the bytes
    for a package that is one file."""
    digest = hashlib.sha256()
    for file in files:
        if not file.path:
            digest.update(file.data)
            continue
        rel = file.path.encode()
        executable = b"x" if file.executable else b"-"
        content = hashlib.sha256(file.data).digest()
        digest.update(len(rel).to_bytes(8, "big") + rel + executable + content)
    return digest.hexdigest()


def tree_digest(path: Path) -> str:
    """`files_digest` of a trusted directory (or file): the harness, an installed plugin."""
    if path.is_file():
        return files_digest([PackageFile("", path.read_bytes(), False)])
    return files_digest(
        PackageFile(file.relative_to(path).as_posix(), file.read_bytes(), os.access(file, os.X_OK))
        for file in package_files(path)
    )


def read_package(package: LocalPackage, rules: LocalPackageRules) -> Iterator[PackageFile]:
    """The files of a local package in a stable order, read below its root without following
    a link (a link, a FIFO or a device is left out); LocalPackageRefused beyond the limits or
    when the package itself is no directory or file there."""
    what = f"{PROJECT_FILE}: the local package {package.name} ({package.written})"
    budget = _Budget(rules, what)
    try:
        found = store_reads.kind(package.root, package.path)
    except FileNotFoundError:  # a path out of its root (`..`): never opened
        found = None
    if found == "file":
        file = budget.read(_opened(lambda: store_reads.open_file(package.root, package.path)), "")
        if file is not None:
            yield file
        return
    if found != "dir":
        where = "the model directory" if package.relative else str(package.root)
        shown = package.written if package.relative else package.path
        raise LocalPackageRefused(
            f"{what}: {shown} is no directory or file in {where} (a link is never followed)"
        )
    yield from _read_dir(package.root, package.path, "", budget, 1)


@dataclass
class _Budget:
    rules: LocalPackageRules
    what: str
    entries: int = 0
    bytes: int = 0

    def look(self) -> None:
        self.entries += 1
        if self.entries > self.rules.max_entries:
            raise LocalPackageRefused(
                f"{self.what} holds more than {self.rules.max_entries} files and directories "
                "(SIMRUN_UPLOAD_MAX_FILES)"
            )

    def read(self, opened: BinaryIO | None, rel: str) -> PackageFile | None:
        """The file opened (None: gone, or no regular file any more), read whole."""
        if opened is None:
            return None
        with opened as handle:
            info = os.fstat(handle.fileno())
            room = self.rules.max_bytes - self.bytes
            # what the file holds, not the room left: `read(n)` sets n bytes aside first
            data = handle.read(min(room, info.st_size) + 1)
            if info.st_size < len(data) <= room:  # it grew since: the rest, one byte past
                data += handle.read(room + 1 - len(data))
        self.bytes += len(data)
        if self.bytes > self.rules.max_bytes:
            raise LocalPackageRefused(
                f"{self.what} holds more than {self.rules.max_bytes} bytes "
                "(SIMRUN_LOCAL_PACKAGE_MAX_BYTES)"
            )
        return PackageFile(rel, data, bool(info.st_mode & _EXECUTABLE))


def _read_dir(
    root: Path, top: Path, prefix: str, budget: _Budget, depth: int
) -> Iterator[PackageFile]:
    """A directory's regular files (sorted), then its subdirectories' in order."""
    if depth > MAX_DEPTH:
        raise LocalPackageRefused(f"{budget.what} is nested deeper than {MAX_DEPTH} directories")
    files: list[str] = []
    dirs: list[str] = []
    try:
        fd = store_reads.open_dir(root, top / prefix)
    except FileNotFoundError:
        return  # replaced since its parent was listed
    try:
        with os.scandir(fd) as scan:
            for item in scan:  # the kind from the listing, before anything is opened
                budget.look()
                if item.is_file(follow_symlinks=False):
                    files.append(item.name)
                elif item.is_dir(follow_symlinks=False) and not _skipped(item.name):
                    dirs.append(item.name)
        for name in sorted(files):
            file = budget.read(_opened(partial(_open_in, fd, name)), prefix + name)
            if file is not None:
                yield file
    finally:
        os.close(fd)
    for name in sorted(dirs):
        yield from _read_dir(root, top, f"{prefix}{name}/", budget, depth + 1)


def _open_in(dir_fd: int, name: str) -> BinaryIO:
    """A regular file of an open directory, not through a link (`store_reads`' flags)."""
    fd = os.open(name, store_reads.FILE_FLAGS, dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise store_reads.NotInStore(errno.ENOENT, "no regular file", name)
    return os.fdopen(fd, "rb")


def _opened(open_it: Callable[[], BinaryIO]) -> BinaryIO | None:
    """The file `open_it` opens; None when it is gone, became a link or no regular file
    since it was listed."""
    try:
        return open_it()
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) or exc.errno in (errno.ELOOP, errno.ENXIO):
            return None
        raise


# --- what a pyproject.toml names -------------------------------------------------------------


@dataclass(frozen=True)
class _Declared:
    name: str
    written: str  # the path or file:// URL as written
    where: str  # the entry, as a refusal names it
    path: PurePosixPath  # as written: relative to the model directory, or absolute


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _table(data: object, key: str) -> dict[str, Any]:
    found = data.get(key) if isinstance(data, dict) else None
    return found if isinstance(found, dict) else {}


def _declared(project: dict[str, Any]) -> list[_Declared]:
    """Every local path the environment installs: `file:` dependencies, and the `path` of
    each sources entry a dependency uses (an entry no dependency uses is not looked at)."""
    requirements = _table(project, "project").get("dependencies", [])
    found: dict[str, _Declared] = {}
    used: set[str] = set()
    for requirement in requirements if isinstance(requirements, list) else []:
        match = _NAME.match(requirement) if isinstance(requirement, str) else None
        if match is None:
            continue
        used.add(canonical(match.group(1)))
        url = requirement.split("@", 1)[1].split(";", 1)[0].strip() if "@" in requirement else ""
        if url.lower().startswith("file:"):
            where = f"the dependency {requirement!r}"
            path = PurePosixPath(unquote(urlparse(url).path))
            found[canonical(match.group(1))] = _Declared(match.group(1), url, where, path)
    sources = _table(_table(_table(project, "tool"), "uv"), "sources")
    for name, source in sources.items():
        if canonical(name) not in used:
            continue
        for entry in source if isinstance(source, list) else [source]:
            if isinstance(entry, dict) and "path" in entry:
                written = str(entry["path"])
                where = f"[tool.uv.sources] {name} = {{ path = {written!r} }}"
                found[canonical(name)] = _Declared(name, written, where, PurePosixPath(written))
    return sorted(found.values(), key=lambda d: d.name)


def _placed(declared: _Declared, model_dir: Path, rules: LocalPackageRules) -> tuple[Path, Path]:
    """(the root it is read below, its path) of a declared package; LocalPackageRefused for
    a path outside the model directory and outside every allowed root."""
    normal = posixpath.normpath(declared.path.as_posix())
    if not declared.path.is_absolute():
        if normal == ".." or normal.startswith("../"):
            raise LocalPackageRefused(
                f"{PROJECT_FILE}: {declared.where}: {declared.written} leaves the model "
                "directory; a local package lies inside the model directory, named by a "
                "relative path that stays in it (the environment is built from the model's "
                "snapshot), or inside a directory allowed for local packages, named by its "
                f"absolute path ({rules.allowed()})"
            )
        return model_dir.parent.parent, model_dir / normal
    target = Path("/" + normal.lstrip("/"))
    for root in rules.roots:
        if target.is_relative_to(root):
            return root, target
    raise LocalPackageRefused(
        f"{PROJECT_FILE}: {declared.where}: {target} is outside the model directory and "
        f"outside the directories allowed for local packages ({rules.allowed()}); put the "
        "package inside the model directory and name it by a relative path"
    )


def local_packages(model_dir: Path, rules: LocalPackageRules | None = None) -> list[LocalPackage]:
    """The local packages of a model's `pyproject.toml` (a snapshot's: read below its
    store, no link followed), by name, each with its digest.

    Raises LocalPackageRefused for a path outside the model directory and outside the
    allowed roots, one that is no directory or file there, or one beyond the limits.
    """
    rules = rules or LocalPackageRules()
    model_dir = Path(os.path.abspath(model_dir))
    try:
        text = store_reads.read_bytes(
            model_dir.parent.parent, model_dir / PROJECT_FILE, limit=PROJECT_MAX_BYTES
        )
    except FileNotFoundError:
        return []
    except store_reads.TooLarge:
        raise LocalPackageRefused(
            f"{PROJECT_FILE}: larger than {PROJECT_MAX_BYTES} bytes"
        ) from None
    try:
        project = tomllib.loads(text.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LocalPackageRefused(f"{PROJECT_FILE}: not valid TOML: {exc}") from None
    packages = []
    for declared in _declared(project):
        root, path = _placed(declared, model_dir, rules)
        found = LocalPackage(declared.name, path, "", declared.written, root)
        digest = files_digest(read_package(found, rules))
        packages.append(LocalPackage(declared.name, path, digest, declared.written, root))
    return packages


def identity_text(packages: list[LocalPackage]) -> bytes:
    """The local packages' part of an environment's identity, as stable bytes."""
    return json.dumps([p.identity() for p in packages], sort_keys=True).encode()

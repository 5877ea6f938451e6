"""What an environment's plugins are, from their packages' metadata alone (nothing imported).

An `Environment` is where a type's code runs: the service's own Python, or a model's
environment (locally a virtual environment in the store). Its plugins are the entry points of
the group `simrun.task_types` of the distributions on its import path, each with a **digest**
of the code it runs: for a plugin installed from a directory (editable or local, PEP 610) the
digest of that directory's files, for an installed wheel the digest of its `RECORD` (which
lists the hash of every file), else the digest of its metadata and of the module its entry
point names. An edit on disk changes the digest, and the service asks a new plugin host
(`runs.plugin_host`) at its next question; a plugin installed meanwhile is found at once
(the import path's directories change, and the listing is read again).

No Django here: `simrun validate` lists plugins too.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import Distribution, distributions
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from runs.local_packages import package_files
from simrun_harness.plugin import ENTRY_POINT_GROUP

SERVICE_ENVIRONMENT = "service"


@dataclass(frozen=True)
class Environment:
    """Where a type's code runs: its name (`service` or an environment's digest), its Python,
    the directories its distributions are read from, and the import path a plugin host of it
    puts in front (the service's own process's path: plugins it was given on the spot)."""

    name: str
    python: str
    site: tuple[str, ...]
    path: tuple[str, ...] = ()


def service_environment() -> Environment:
    """The Python the service runs with, and its import path as this process has it."""
    here = tuple(entry for entry in sys.path if entry and os.path.isdir(entry))
    return Environment(name=SERVICE_ENVIRONMENT, python=sys.executable, site=here, path=here)


def environment_at(root: Path, name: str) -> Environment | None:
    """The built virtual environment `name` under `root`; None when it is not there (not
    built yet, or an image on a cluster)."""
    python = root / name / "bin" / "python"
    if not python.exists():
        return None
    site = tuple(str(p) for p in sorted((root / name / "lib").glob("python*/site-packages")))
    return Environment(name=name, python=str(python), site=site)


@dataclass(frozen=True)
class Plugin:
    """One entry point of `simrun.task_types`, as its package's metadata says: the type's
    name, what it points at, the package, its version, where its files are, and the digest of
    the code it runs."""

    name: str
    value: str
    package: str
    version: str
    source: str
    digest: str = field(default="", compare=False)

    def label(self) -> str:
        return f"plugin {self.package} {self.version} ({self.value})"

    def short_digest(self) -> str:
        return self.digest.rsplit("+", 1)[-1][:12]


def site_stamp(site: Iterable[str]) -> tuple[tuple[str, int], ...]:
    """The directories with their modification times: installing, upgrading or removing a
    distribution changes its directory's."""
    stamp = []
    for entry in site:
        try:
            stamp.append((entry, os.stat(entry).st_mtime_ns))
        except OSError:
            continue
    return tuple(stamp)


def plugins_of(env: Environment) -> dict[str, list[Plugin]]:
    """Every entry point of the group in `env`, by type name; read again once something was
    installed or removed there, each digest taken now (an edit of a plugin's files shows)."""
    listed = _listed(env.site, site_stamp(env.site))
    found: dict[str, list[Plugin]] = {}
    for name, entries in listed.items():
        found[name] = [
            Plugin(
                name=p.name,
                value=p.value,
                package=p.package,
                version=p.version,
                source=p.source,
                digest=_digest(p, env.site),
            )
            for p in entries
        ]
    return found


@lru_cache(maxsize=16)
def _listed(site: tuple[str, ...], stamp: tuple[tuple[str, int], ...]) -> dict[str, list[Plugin]]:
    found: dict[str, list[Plugin]] = {}
    seen: set[str] = set()
    for dist in distributions(path=list(site)):
        name = dist.metadata["Name"] or "?"
        if name in seen:  # the first on the path wins, as for an import
            continue
        seen.add(name)
        for ep in dist.entry_points:
            if ep.group != ENTRY_POINT_GROUP:
                continue
            found.setdefault(ep.name, []).append(
                Plugin(
                    name=ep.name,
                    value=ep.value,
                    package=name,
                    version=dist.version,
                    source=_source_of(dist),
                    digest=_metadata_text(dist),
                )
            )
    return found


def forget() -> None:
    """Drop what was read of the installed plugins (tests that install some on the spot)."""
    _listed.cache_clear()
    _FILES.clear()


def _metadata_text(dist: Distribution) -> str:
    """What the digest falls back on (kept here, used by `_digest`): the RECORD of an
    installed wheel, else its metadata's place."""
    record = dist.read_text("RECORD")
    if record:
        return json.dumps({"record": hashlib.sha256(record.encode()).hexdigest()})
    return json.dumps({"metadata": str(getattr(dist, "_path", ""))})


def _project_of(dist: Distribution) -> str:
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except (OSError, ValueError):
        return ""
    url = direct.get("url", "") if isinstance(direct, dict) else ""
    if not url.startswith("file://"):
        return ""
    path = unquote(urlparse(url).path)
    return path if os.path.isdir(path) else ""


def _source_of(dist: Distribution) -> str:
    """Where a distribution's code is: the project of an editable or local install, else the
    directory it is installed in."""
    project = _project_of(dist)
    if project:
        return project
    try:
        return str(dist.locate_file(""))
    except (AttributeError, NotImplementedError):
        return ""


def search_path(site: Iterable[str]) -> list[str]:
    """The import path a fresh interpreter of an environment has: its directories and the
    directories their `.pth` files name (an editable install's source), without running any
    `import` line of them."""
    found: list[str] = []
    for entry in site:
        if entry not in found:
            found.append(entry)
        try:
            pth = sorted(p for p in os.listdir(entry) if p.endswith(".pth"))
        except OSError:
            continue
        for name in pth:
            try:
                lines = Path(entry, name).read_text(errors="replace").splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if not line or line.startswith(("#", "import ", "import\t")):
                    continue
                path = os.path.join(entry, line) if not os.path.isabs(line) else line
                if os.path.isdir(path) and path not in found:
                    found.append(path)
    return found


def module_place(module: str, site: Iterable[str]) -> Path | None:
    """Where the top-level package (or module) `module` would be imported from in an
    environment, found on its path without importing anything."""
    top = module.split(".")[0]
    for entry in search_path(site):
        for candidate in (Path(entry) / top, Path(entry) / f"{top}.py"):
            if candidate.is_dir() and (candidate / "__init__.py").exists():
                return candidate
            if candidate.is_file():
                return candidate
    return None


def _digest(plugin: Plugin, site: tuple[str, ...]) -> str:
    """The plugin's version and a digest of the code it runs, now: the files of the package
    its entry point imports, wherever they are (an editable install's source, or the files a
    wheel installed: the same code gives the same digest either way), else its RECORD."""
    place = module_place(plugin.value.split(":", 1)[0], site)
    if place is not None:
        return f"{plugin.version}+{files_digest([place])}"
    made = json.loads(plugin.digest)
    if "record" in made:
        return f"{plugin.version}+{made['record'][:32]}"
    return f"{plugin.version}+{files_digest([Path(made['metadata'])])}"


_FILES: dict[str, tuple[tuple[int, int, int], str]] = {}
_FILES_LOCK = threading.Lock()
# A file modified less than this before it was hashed may be rewritten with the same size
# and the same modification time (a filesystem's timestamps are coarse: a kernel tick, a
# second on some): its hash is not reused by its stat, the bytes are read again.
RACY_NS = 3_000_000_000


def _file_hash(path: Path) -> str:
    """SHA-256 of a file's bytes, read again whenever its size, modification time or inode
    changed, or when it had been modified just before it was hashed (most files of a plugin
    stay as they were between two questions; a file saved twice within a timestamp's
    granularity keeps its stat, and would otherwise keep its old hash)."""
    st = path.stat()
    mark = (st.st_size, st.st_mtime_ns, st.st_ino)
    key = str(path)
    with _FILES_LOCK:
        known = _FILES.get(key)
    if known is not None and known[0] == mark:
        return known[1]
    hashed_at = time.time_ns()
    value = hashlib.sha256(path.read_bytes()).hexdigest()
    if st.st_mtime_ns < hashed_at - RACY_NS:
        with _FILES_LOCK:
            _FILES[key] = (mark, value)
    return value


def files_digest(places: Iterable[Path]) -> str:
    """A digest of the files under `places` (directories walked as a package's files are,
    caches and build directories left out), by name, relative path and content: not by
    where they lie."""
    digest = hashlib.sha256()
    for place in places:
        files = [place] if place.is_file() else list(package_files(place))
        for file in files:
            try:
                rel = file.relative_to(place).as_posix() if file != place else ""
                content = _file_hash(file)
            except OSError:
                continue
            digest.update(f"{place.name}\0{rel}\0{content}\n".encode())
    return digest.hexdigest()[:32]


def environment_key(env: Environment, plugins: dict[str, list[Plugin]]) -> str:
    """What a plugin host of `env` answers for: its Python, import path, installed state and
    every plugin's digest. A host is reused only for the same key."""
    data: dict[str, Any] = {
        "python": env.python,
        "path": env.path,
        "site": site_stamp(env.site),
        "plugins": sorted((p.name, p.value, p.digest) for ps in plugins.values() for p in ps),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

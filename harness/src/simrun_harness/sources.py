"""Plugins installed from a directory run their current source, never stale bytecode.

Python takes a module's cached bytecode (`__pycache__/*.pyc`) for current when the source's
size and its modification time in whole seconds are those it was compiled from. A plugin the
user edits in place — twice within a second at the same size, or while a process compiles
it — would then run its old code, in a fresh pod as in a standby. For the files of a
task-type plugin installed from a directory (editable or local, PEP 610: `project_dirs`),
`install` makes the import check the bytecode against a hash of the source instead, and
write it as a checked hash-based pyc (PEP 552), which every later Python process checks the
same way.

The finder `install` puts first on the meta path also tells a `seen` callback the file of
each module before the module is read: the standby stamps it then, so an edit made while it
imports is not taken for the state it imported (`simrun_harness.standby`).

Only the standard library: the standby imports this before anything else.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import marshal
import os
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import CodeType, ModuleType
from urllib.parse import unquote, urlparse

ENTRY_POINT_GROUP = "simrun.task_types"  # simrun_harness.plugin's, without importing pydantic
_CHECKED_HASH = (0b11).to_bytes(4, "little")  # PEP 552 flags: hash-based, checked


def project_dirs() -> list[str]:
    """The directories of task-type plugins installed from a directory (PEP 610)."""
    from importlib.metadata import entry_points

    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            direct = json.loads((ep.dist and ep.dist.read_text("direct_url.json")) or "null")
        except (OSError, ValueError):
            continue
        url = direct.get("url", "") if isinstance(direct, dict) else ""
        if url.startswith("file://"):
            path = unquote(urlparse(url).path)
            if os.path.isdir(path) and path not in found:
                found.append(path)
    return found


def plugin_places() -> list[str]:
    """Where the top-level module of every task-type plugin is (its package's directory, or
    its module's file), found without importing anything."""
    from importlib.metadata import entry_points

    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        top = ep.value.split(":", 1)[0].split(".")[0].strip()
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        places = list(spec.submodule_search_locations or [])
        if not places and isinstance(spec.origin, str) and spec.has_location:
            places = [spec.origin]
        found += [place for place in places if place not in found]
    return found


class HashCheckedLoader(importlib.machinery.SourceFileLoader):
    """A source file's loader that takes its cached bytecode only when the bytecode was
    compiled from the same bytes (a checked hash-based pyc), never by time and size."""

    def get_code(self, fullname: str) -> CodeType:
        source_path = self.get_filename(fullname)
        source = self.get_data(source_path)
        key = importlib.util.source_hash(source)
        try:
            cached: str | None = importlib.util.cache_from_source(source_path)
        except NotImplementedError:
            cached = None
        if cached is not None:
            try:
                data = self.get_data(cached)
            except OSError:
                data = b""
            header = importlib.util.MAGIC_NUMBER + _CHECKED_HASH + key
            if data[:16] == header:
                try:
                    code = marshal.loads(memoryview(data)[16:])
                except (EOFError, ValueError, TypeError):
                    code = None
                if isinstance(code, CodeType) and code.co_filename == source_path:
                    return code
        code = self.source_to_code(source, source_path)
        if cached is not None and not sys.dont_write_bytecode:
            header = importlib.util.MAGIC_NUMBER + _CHECKED_HASH + key
            self.set_data(cached, header + marshal.dumps(code))  # quietly not where read-only
        return code


class SourceFinder(importlib.abc.MetaPathFinder):
    """First on the meta path: finds a module with the finders after it, then gives a source
    file of a plugin project the `HashCheckedLoader` and tells `seen` the module's file."""

    def __init__(self) -> None:
        self.projects: tuple[str, ...] = ()
        self.seen: Callable[[str], None] | None = None

    def add_projects(self, projects: Sequence[str]) -> None:
        """Check the bytecode of the files under `projects` (directories, or single module
        files) by hash from now on."""
        prefixes = set(self.projects)
        for project in projects:
            single = os.path.isfile(project)
            for form in (os.path.abspath(project), os.path.realpath(project)):
                prefixes.add(form if single else os.path.join(form, ""))
        self.projects = tuple(sorted(prefixes))

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        if spec is None or not spec.has_location or not isinstance(spec.origin, str):
            return spec
        if self.seen is not None:
            self.seen(spec.origin)
        loader = spec.loader
        plain = type(loader) is importlib.machinery.SourceFileLoader
        if plain and spec.origin.startswith(self.projects):  # () starts nothing
            spec.loader = HashCheckedLoader(loader.name, loader.path)
        return spec


def install(projects: Sequence[str] = ()) -> SourceFinder:
    """Put the finder first on the meta path (once) and check the bytecode of `projects`'
    files by hash; the finder."""
    finder = next((f for f in sys.meta_path if isinstance(f, SourceFinder)), None)
    if finder is None:
        finder = SourceFinder()
        sys.meta_path.insert(0, finder)
    finder.add_projects(projects)
    return finder

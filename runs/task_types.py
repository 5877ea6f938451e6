"""The task types simrun knows: the plugins' (entry points) and the built-in `command`.

Plugin types run inside model environments through the harness; `command` is run by the
backend itself (an image and its args on the cluster, the args as a process locally).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from simrun_harness.plugin import ENTRY_POINT_GROUP, ResourceHint, TaskType, UnsplitTaskType

COMMAND = "command"


class CommandSettings(BaseModel):
    """Settings of the built-in `command` type."""

    model_config = ConfigDict(extra="forbid")

    image: str | None = Field(
        None, description="Image to run on the cluster; locally the args run as a process."
    )
    args: list[str] = Field(min_length=1, description="The command and its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment.")


class CommandType(UnsplitTaskType):
    """Run an image's command once; each input is in SIMRUN_INPUT_<PORT>, a path relative to
    SIMRUN_RUN_DIR (e.g. `tasks/scan/out`)."""

    name: ClassVar[str] = COMMAND
    settings_model: ClassVar[type[BaseModel]] = CommandSettings
    hint: ClassVar[ResourceHint] = ResourceHint(memory_base_gb=0.5, memory_per_worker_gb=0.5)
    description: ClassVar[str] = "An image and its args, run once."
    any_port: ClassVar[bool] = True


@dataclass(frozen=True)
class Plugin:
    """One installed entry point of `simrun.task_types`, as its package metadata says
    (nothing imported): the type's name, what it points at, the package, its version and
    where the package's files are (an editable install: its project directory)."""

    name: str
    value: str
    package: str
    version: str
    source: str

    def label(self) -> str:
        return f"plugin {self.package} {self.version} ({self.value})"


class TypeUnavailable(KeyError):
    """A type that cannot be used: unknown, defined twice, or its plugin failed to import.
    A KeyError, so `types.get(name)` is None for it; `str()` is the whole message."""

    def __str__(self) -> str:
        return str(self.args[0])


def _source_of(dist: Any) -> str:
    """Where a distribution's code is: the project of an editable or local install (PEP 610's
    direct_url.json), else the directory it is installed in."""
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except (OSError, ValueError):
        direct = None
    if isinstance(direct, dict) and str(direct.get("url", "")).startswith("file://"):
        return str(direct["url"])[len("file://") :]
    try:
        return str(dist.locate_file(""))
    except (AttributeError, NotImplementedError):
        return ""


def installed_stamp() -> tuple[tuple[str, int], ...]:
    """The import path's directories with their modification times: installing, upgrading
    or removing a distribution changes its directory's, so a long-running process (the web
    service, a worker) sees a plugin installed after it started (`simrun plugin install`)."""
    stamp = []
    for entry in sys.path:
        try:
            stamp.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            continue
    return tuple(stamp)


def plugins() -> dict[str, list[Plugin]]:
    """Every installed entry point of the group by type name, from metadata only (fast: no
    plugin module is imported to list or check names); read again once something was
    installed or removed."""
    return _plugins_as_installed(installed_stamp())


@lru_cache(maxsize=4)
def _plugins_as_installed(stamp: tuple[tuple[str, int], ...]) -> dict[str, list[Plugin]]:
    found: dict[str, list[Plugin]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist
        plugin = Plugin(
            name=ep.name,
            value=ep.value,
            package=dist.metadata["Name"] if dist is not None else "?",
            version=dist.version if dist is not None else "?",
            source=_source_of(dist) if dist is not None else "",
        )
        found.setdefault(ep.name, []).append(plugin)
    return found


def origin(name: str) -> str:
    """Where type `name` comes from, for messages: `built-in` or its plugin's label."""
    if name == COMMAND:
        return "built-in"
    found = plugins().get(name)
    return found[0].label() if found else "no plugin"


def plugin_identity(name: str) -> tuple[str, str, str]:
    """(package, version, digest) of the plugin of type `name`: the digest of its files for a
    plugin installed from a directory (editable or local: its code changes without a new
    version), else ''. `command` is simrun's own."""
    if name == COMMAND:
        return "simrun", _simrun_version(), ""
    found = plugins().get(name)
    if not found:
        return "?", "?", ""
    plugin = found[0]
    if (
        plugin.source
        and Path(plugin.source).is_dir()
        and (Path(plugin.source) / "pyproject.toml").is_file()
    ):
        from runs.local_packages import tree_digest

        return plugin.package, plugin.version, tree_digest(Path(plugin.source))
    return plugin.package, plugin.version, ""


def _simrun_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("simrun")
    except PackageNotFoundError:
        return "?"


def load_type(name: str) -> type[TaskType]:
    """The type `name`, importing only its own plugin module (once per installed state).

    Raises TypeUnavailable naming the plugin and its error when it cannot be imported, is no
    TaskType, or two plugins (or a plugin and a built-in) define the name.
    """
    return _load_as_installed(name, installed_stamp())


def forget_plugins() -> None:
    """Drop what was read of the installed plugins (tests that install some on the spot)."""
    _plugins_as_installed.cache_clear()
    _load_as_installed.cache_clear()


@lru_cache(maxsize=256)
def _load_as_installed(name: str, stamp: tuple[tuple[str, int], ...]) -> type[TaskType]:
    if name == COMMAND:
        if plugins().get(name):
            raise TypeUnavailable(f"task type {name!r} is defined twice (a plugin shadows it)")
        return CommandType
    found = plugins().get(name)
    if not found:
        known = ", ".join(known_names())
        raise TypeUnavailable(f"unknown task type {name!r} (known: {known})")
    if len(found) > 1:
        where = "; ".join(p.label() for p in found)
        raise TypeUnavailable(f"task type {name!r} is defined twice: {where}")
    plugin = found[0]
    try:
        cls = EntryPoint(name=name, value=plugin.value, group=ENTRY_POINT_GROUP).load()
    except Exception as exc:  # a plugin's import may raise anything; it is named, not raised
        raise TypeUnavailable(
            f"task type {name!r} failed to load from {plugin.label()}: {type(exc).__name__}: {exc}"
        ) from exc
    if not (isinstance(cls, type) and issubclass(cls, TaskType)):
        raise TypeUnavailable(f"task type {name!r} of {plugin.label()} is not a TaskType class")
    return cls


def known_names() -> list[str]:
    """Every type name, loadable or not, without importing any plugin."""
    return sorted({COMMAND, *plugins()})


class Types(Mapping[str, type[TaskType]]):
    """The task types by name, each imported on first use.

    Validating a workflow imports only the types it names; iterating lists the names from
    metadata. `items()` holds only the types that load; `problems()` the others' messages.
    """

    def __getitem__(self, name: str) -> type[TaskType]:
        return load_type(name)

    def __iter__(self) -> Iterator[str]:
        return iter(known_names())

    def __len__(self) -> int:
        return len(known_names())

    def items(self) -> list[tuple[str, type[TaskType]]]:  # type: ignore[override]
        loaded = []
        for name in known_names():
            try:
                loaded.append((name, load_type(name)))
            except TypeUnavailable:
                continue
        return loaded

    def problems(self) -> dict[str, str]:
        """The message of every type that does not load, by name."""
        found = {}
        for name in known_names():
            try:
                load_type(name)
            except TypeUnavailable as exc:
                found[name] = str(exc)
        return found


def registry() -> Types:
    """Every type by name: the built-in `command` and the installed plugins', loaded lazily."""
    return Types()


def takes_any_port(cls: type[TaskType]) -> bool:
    return bool(getattr(cls, "any_port", False))


def describe(name: str, cls: type[TaskType]) -> dict[str, Any]:
    """What the API and the pages show of a type."""
    return {
        "name": name,
        "description": cls.description or (cls.__doc__ or "").strip().split("\n")[0],
        "splittable": cls.splittable,
        "ports": list(cls.ports),
        "outputs": list(cls.outputs),
        "any_port": takes_any_port(cls),
        "hint": cls.hint.model_dump(),
        "settings_schema": cls.settings_schema(),
    }

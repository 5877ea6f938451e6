"""The task types simrun knows: the built-in `command` and the plugins' of an environment.

The service never imports a plugin's module. What it needs of a type — what it is (its
settings' JSON Schema, its ports, its resource hint), its settings checked and keyed, its
units — it asks a plugin host in the environment the type runs in (`runs.plugin_host`),
keyed by the digest of the plugin's files (`runs.plugin_metadata`) and kept by that digest
(in this process, and on disk: `runs.plugin_cache`). So the code on disk is the code that
answers: an edit is used at the next question, a plugin installed meanwhile is found at once,
and a plugin that crashes, hangs or takes all memory is an error naming the type and the
plugin, never a harm to the service. `command` is simrun's own code and described here.

No Django here: `simrun validate` uses the same catalog.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from runs import plugin_cache
from runs.plugin_host import HostFailed, HostSpec, ask
from runs.plugin_metadata import (
    Environment,
    Plugin,
    environment_key,
    forget,
    plugins_of,
    service_environment,
)
from runs.type_refusals import SettingsInvalid, TooManyUnits, TypeUnavailable, UnitsFailed
from simrun_harness.plugin import ResourceHint, TaskType, UnsplitTaskType
from simrun_harness.settings_check import Problem

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
class TypeInfo:
    """What the service knows of a type: all a workflow is checked and planned with."""

    name: str
    plugin: Plugin | None
    description: str
    splittable: bool
    ports: tuple[str, ...]
    outputs: tuple[str, ...]
    any_port: bool
    hint: ResourceHint
    settings_schema: dict[str, Any] = field(compare=False)

    def origin(self) -> str:
        """Where it comes from, for messages: `built-in` or its plugin's label."""
        return self.plugin.label() if self.plugin else "built-in"

    def describe(self) -> dict[str, Any]:
        """What the API and the pages show of a type."""
        return {
            "name": self.name,
            "description": self.description,
            "splittable": self.splittable,
            "ports": list(self.ports),
            "outputs": list(self.outputs),
            "any_port": self.any_port,
            "hint": self.hint.model_dump(),
            "settings_schema": self.settings_schema,
        }


def info_of_class(name: str, cls: type[TaskType], plugin: Plugin | None = None) -> TypeInfo:
    """A type described from its class in this process: `command` (or a test's classes)."""
    return TypeInfo(
        name=name,
        plugin=plugin,
        description=cls.description or (cls.__doc__ or "").strip().split("\n")[0],
        splittable=bool(cls.splittable),
        ports=tuple(cls.ports),
        outputs=tuple(cls.outputs),
        any_port=bool(getattr(cls, "any_port", False)),
        hint=cls.hint,
        settings_schema=cls.settings_schema(),
    )


class Types(Mapping[str, TypeInfo]):
    """The types of one environment by name: `command` and its plugins', each described by a
    plugin host of that environment on first use (then kept by its plugin's digest)."""

    def __init__(self, env: Environment | None = None) -> None:
        self.env = env or service_environment()
        self._plugins: dict[str, list[Plugin]] | None = None

    # -- what is installed (metadata only) --------------------------------------------------

    def plugins(self) -> dict[str, list[Plugin]]:
        if self._plugins is None:
            self._plugins = plugins_of(self.env)
        return self._plugins

    def plugin(self, name: str) -> Plugin:
        """The one plugin of type `name`; TypeUnavailable when unknown or defined twice."""
        found = self.plugins().get(name)
        if name == COMMAND and found:
            raise TypeUnavailable(f"task type {name!r} is defined twice (a plugin shadows it)")
        if not found:
            raise TypeUnavailable(f"unknown task type {name!r} (known: {', '.join(self)})")
        if len(found) > 1:
            where = "; ".join(p.label() for p in found)
            raise TypeUnavailable(f"task type {name!r} is defined twice: {where}")
        return found[0]

    def origin(self, name: str) -> str:
        if name == COMMAND:
            return "built-in"
        found = self.plugins().get(name)
        return found[0].label() if found else "no plugin"

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({COMMAND, *self.plugins()}))

    def __len__(self) -> int:
        return len({COMMAND, *self.plugins()})

    # -- questions to a host ----------------------------------------------------------------

    def _spec(self) -> HostSpec:
        key = environment_key(self.env, self.plugins())
        return HostSpec(python=self.env.python, path=self.env.path, key=key)

    def _ask(self, plugin: Plugin, request: dict[str, Any], *, cache: bool) -> dict[str, Any]:
        """The host's answer, from the cache when this question was answered for this very
        code; TypeUnavailable naming the plugin when the host failed or cannot load it."""
        key = plugin_cache.key_of(self.env.python, self.env.name, plugin.digest, request)
        if cache:
            known = plugin_cache.get(key)
            if isinstance(known, dict):
                return known
        try:
            answer = ask(self._spec(), request)
        except HostFailed as exc:
            what = {"describe": "loading it", "validate": "checking its settings"}.get(
                request["op"], "listing its units"
            )
            raise TypeUnavailable(
                f"task type {plugin.name!r} of {plugin.label()}: its plugin host failed while "
                f"{what}: {exc}"
            ) from None
        if answer.get("kind") == "type":
            raise TypeUnavailable(
                f"task type {plugin.name!r} failed to load from {plugin.label()}: {answer['error']}"
            )
        if cache and answer.get("kind") not in ("memory",):
            plugin_cache.put(key, answer)
        return answer

    def __getitem__(self, name: str) -> TypeInfo:
        if name == COMMAND:
            if self.plugins().get(name):
                self.plugin(name)  # raises: a plugin shadows the built-in
            return info_of_class(COMMAND, CommandType)
        plugin = self.plugin(name)
        answer = self._ask(plugin, {"op": "describe", "type": name}, cache=True)
        return TypeInfo(
            name=name,
            plugin=plugin,
            description=answer["description"],
            splittable=answer["splittable"],
            ports=tuple(answer["ports"]),
            outputs=tuple(answer["outputs"]),
            any_port=answer["any_port"],
            hint=ResourceHint.model_validate(answer["hint"]),
            settings_schema=answer["settings_schema"],
        )

    def check(self, name: str, settings: dict[str, Any]) -> dict[str, Any]:
        """The settings as the type's model keys them; SettingsInvalid with every problem
        (one naming the plugin when its validator raised something else)."""
        if name == COMMAND:
            return check_class_settings(CommandType, settings)
        plugin = self.plugin(name)
        answer = self._ask(
            plugin, {"op": "validate", "type": name, "settings": settings}, cache=True
        )
        if answer["ok"]:
            keyed: dict[str, Any] = answer["settings"]
            return keyed
        return _refused_settings(answer, plugin)

    def units(
        self,
        name: str,
        settings: dict[str, Any],
        *,
        task_id: str,
        model_dir: Path | None,
        limit: int,
        out: Path | None = None,
    ) -> int:
        """How many units the type lists for these settings (written one canonical JSON line
        each to `out` when given); UnitsFailed, TooManyUnits, SettingsInvalid."""
        plugin = self.plugin(name)
        request = units_question(name, settings, task_id, model_dir, limit, out)
        answer = self._ask(plugin, request, cache=out is None)
        if answer["ok"]:
            return int(answer["count"])
        kind = answer["kind"]
        if kind == "too_many":
            raise TooManyUnits(answer["count"], answer["limit"])
        if kind == "settings":
            _refused_settings(answer, plugin)
        if kind == "memory":
            raise UnitsFailed(
                f"units(): ran out of memory (raised by {plugin.label()}; a plugin host may "
                f"use SIMRUN_PLUGIN_HOST_MEMORY_MB)",
                traceback=answer.get("traceback", ""),
            )
        raise UnitsFailed(
            f"units(): {answer['error']} (raised by {plugin.label()})",
            traceback=answer.get("traceback", ""),
            settings_error=bool(answer.get("settings_error")),
        )

    # -- listings ---------------------------------------------------------------------------

    def items(self) -> list[tuple[str, TypeInfo]]:  # type: ignore[override]
        """The types that load, by name."""
        loaded = []
        for name in self:
            try:
                loaded.append((name, self[name]))
            except TypeUnavailable:
                continue
        return loaded

    def problems(self) -> dict[str, str]:
        """The message of every type that does not load, by name."""
        found = {}
        for name in self:
            try:
                self[name]
            except TypeUnavailable as exc:
                found[name] = str(exc)
        return found


def units_question(
    name: str,
    settings: dict[str, Any],
    task_id: str,
    model_dir: Path | None,
    limit: int,
    out: Path | None,
) -> dict[str, Any]:
    """The plugin host's question for the units of a task."""
    return {
        "op": "units",
        "type": name,
        "settings": settings,
        "task_id": task_id,
        "model_dir": str(model_dir) if model_dir else None,
        "out": str(out) if out else None,
        "limit": limit,
    }


def _refused_settings(answer: dict[str, Any], plugin: Plugin) -> Any:
    problems: list[Problem] = [(tuple(loc), msg) for loc, msg in answer["problems"]]
    if answer.get("raised"):
        problems = [(loc, f"{msg} (raised by {plugin.label()})") for loc, msg in problems]
    raise SettingsInvalid(problems)


def check_class_settings(cls: type[TaskType], settings: dict[str, Any]) -> dict[str, Any]:
    """`Types.check` for a class of this process (`command`, a test's types)."""
    from simrun_harness.settings_check import check_settings, keyed_settings

    try:
        validated, problems = check_settings(cls.settings_model, settings)
    except Exception as exc:  # a validator may raise anything: a message, never a traceback
        raise SettingsInvalid([((), f"{type(exc).__name__}: {exc}")]) from None
    if validated is None:
        raise SettingsInvalid(problems)
    return keyed_settings(validated)


class ClassTypes(Types):
    """Types given as classes of this process (tests of the validation and the planning):
    answered here, without a host."""

    def __init__(self, classes: Mapping[str, type[TaskType]]) -> None:
        super().__init__(service_environment())
        self.classes = dict(classes)

    def plugins(self) -> dict[str, list[Plugin]]:
        return {}

    def plugin(self, name: str) -> Plugin:
        raise TypeUnavailable(f"unknown task type {name!r} (known: {', '.join(self)})")

    def origin(self, name: str) -> str:
        return "built-in" if name == COMMAND else f"class {name}"

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.classes))

    def __len__(self) -> int:
        return len(self.classes)

    def __getitem__(self, name: str) -> TypeInfo:
        if name not in self.classes:
            raise TypeUnavailable(f"unknown task type {name!r} (known: {', '.join(self)})")
        return info_of_class(name, self.classes[name])

    def check(self, name: str, settings: dict[str, Any]) -> dict[str, Any]:
        return check_class_settings(self.classes[name], settings)


def registry(env: Environment | None = None) -> Types:
    """The types of `env` (default: the service's own environment)."""
    return Types(env)


def as_types(types: Mapping[str, Any] | None) -> Types:
    """`types` as a catalog: the service's own by default, classes wrapped."""
    if types is None:
        return registry()
    if isinstance(types, Types):
        return types
    return ClassTypes(types)


def forget_plugins() -> None:
    """Drop what was read of the installed plugins (tests that install some on the spot)."""
    forget()


def takes_any_port(info: TypeInfo) -> bool:
    return info.any_port


def plugin_identity(name: str) -> tuple[str, str, str]:
    """(package, version, digest) of the plugin of type `name` in the service's environment:
    the digest of its project's files for a plugin installed from a directory (editable or
    local: its code changes without a new version), else ''. `command` is simrun's own."""
    if name == COMMAND:
        return "simrun", _simrun_version(), ""
    found = registry().plugins().get(name)
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

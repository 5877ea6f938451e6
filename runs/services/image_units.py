"""The units of a run whose model's environment is an image (a cluster), listed in it.

The service cannot start a process in an image, so the submission (`plan_reuse`) asks the
backend for a plugin host in a pod of the image (`Backend.ask_plugin_host`), once for all of
a run's questions: which code each type's plugin is there (`identify`) and the units of each
split task, written to the task's units list in the store. The types are still described
and their settings checked with the service's own copy (its image's); a copy in the model's
environment that differs from it is named in the run's reuse notes. Which code a plugin is in
an image is kept by the image's name and the type (an image never changes), so a run of
unsplit tasks of an image asked before starts no pod.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from runs import plugin_cache
from runs.plugin_metadata import Plugin, module_place, service_environment
from runs.ports import Backend, PluginHostFailed
from runs.store import store_root
from runs.task_types import COMMAND, Types, TypeUnavailable
from simrun_harness.plugin_code import code_digest

IMAGE = "image"
"""The first part of the cache key of what an image answered (its name follows)."""


def _key(question: dict[str, Any]) -> str:
    return json.dumps(question, sort_keys=True)


def _in_store(question: dict[str, Any]) -> dict[str, Any]:
    """The question with its paths relative to the run store (where the pod mounts it)."""
    found = dict(question)
    root = store_root()
    for field in ("model_dir", "out"):
        if found.get(field):
            found[field] = Path(found[field]).absolute().relative_to(root).as_posix()
    return found


class ImageTypes(Types):
    """The types of a run whose environment is the image `environment`: described and checked
    with the service's copy, their units listed and their code identified in the image."""

    def __init__(self, backend: Backend, environment: str) -> None:
        super().__init__(service_environment())
        self.backend = backend
        self.environment = environment
        self._answers: dict[str, dict[str, Any]] = {}
        self._identities: dict[str, dict[str, Any]] = {}

    def _identity_key(self, name: str) -> str:
        return plugin_cache.key_of(IMAGE, self.environment, {"op": "identify", "type": name})

    def prepare(self, names: Iterable[str], questions: Sequence[dict[str, Any]]) -> None:
        """Ask the image, in one pod, which code each type of `names` is (unless known) and
        every units question of `questions`; TypeUnavailable naming the types and plugins
        when its plugin host gave no answers."""
        wanted = sorted(set(names) - {COMMAND})
        asked: list[dict[str, Any]] = []
        for name in wanted:
            known = plugin_cache.get(self._identity_key(name))
            if isinstance(known, dict):
                self._identities[name] = known
            elif name not in self._identities:
                asked.append({"op": "identify", "type": name})
        asked += [q for q in questions if _key(q) not in self._answers]
        if not asked:
            return
        for question, answer in zip(asked, self._ask_image(asked, wanted), strict=True):
            if question["op"] == "identify":
                self._identities[question["type"]] = answer
                if answer.get("ok"):
                    plugin_cache.put(self._identity_key(question["type"]), answer)
            else:
                self._answers[_key(question)] = answer

    def _ask_image(self, questions: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
        from django.conf import settings

        try:
            return self.backend.ask_plugin_host(
                self.environment,
                [_in_store(q) for q in questions],
                timeout_s=settings.SIMRUN_PLUGIN_POD_TIMEOUT_S,
                memory_mb=settings.SIMRUN_PLUGIN_HOST_MEMORY_MB,
            )
        except PluginHostFailed as exc:
            which = ", ".join(f"task type {n!r} of {self.origin(n)}" for n in names)
            raise TypeUnavailable(
                f"{which}: the plugin host in the model's environment (image "
                f"{self.environment[:12]}) failed while listing the units: {exc}"
            ) from None

    def _ask(self, plugin: Plugin, request: dict[str, Any], *, cache: bool) -> dict[str, Any]:
        """Units from the image (asked with the others by `prepare`, else now); the rest
        from the service's copy."""
        if request["op"] != "units":
            return super()._ask(plugin, request, cache=cache)
        if _key(request) not in self._answers:
            self.prepare([request["type"]], [request])
        answer = self._answers[_key(request)]
        if answer.get("kind") == "type":
            raise TypeUnavailable(
                f"task type {plugin.name!r} failed to load from the model environment's copy "
                f"of {plugin.label()}: {answer['error']}"
            )
        return answer

    def copies_differ(self, names: Iterable[str]) -> dict[str, str]:
        """Per type, a note when the image's copy of its plugin is not the service's."""
        notes = {}
        for name in sorted(set(names) - {COMMAND}):
            theirs = self._identities.get(name) or {}
            if not theirs.get("ok"):
                continue
            try:
                mine = self.plugin(name)
            except TypeUnavailable:
                continue
            place = module_place(mine.value.split(":", 1)[0], self.env.site)
            digest = code_digest(place) if place is not None else ""
            if (mine.version, digest) == (theirs["version"], theirs["digest"]):
                continue
            notes[name] = (
                f"the service's copy of {mine.label()} ({digest[:12]}) differs from the model "
                f"environment's, {theirs['package']} {theirs['version']} "
                f"({theirs['digest'][:12]}): the settings were checked with the service's "
                "copy, the units listed (and their settings checked) with the model "
                "environment's"
            )
        return notes

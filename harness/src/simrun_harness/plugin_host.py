"""The plugin host: a process in a model's environment that answers what the service needs of
its task types, so no service process ever imports a plugin's module.

    python -m simrun_harness.plugin_host --memory-mb N

The service (`runs/plugin_host.py`) starts it with the environment's own Python and writes
one request per line on its standard input; it answers each with one line of JSON on the
standard output it was started with (the plugin's own prints go to standard error, which
the service keeps as the host's log):

    {"op": "describe", "type": T}                       what the type is (no code of it run)
    {"op": "validate", "type": T, "settings": {...}}    the settings checked, and as keyed
    {"op": "units", "type": T, "settings": {...}, "task_id": ID, "model_dir": DIR | null,
     "out": FILE | null, "limit": N}                     the units counted (and written)
    {"op": "identify", "type": T}                       its plugin's package, version and
                                                        code digest (`plugin_code.identify`)

Where the service cannot start a process in the environment (an image on a cluster), one
host answers a list of questions and ends (`--once --store DIR --questions JSON`): each
`model_dir` and `out` is relative to the run store mounted at DIR, and each answer is one
line `simrun-plugin-answer: {...}` on its standard output (`parse_answers` reads them back
from the pod's log, where the plugin's own output may lie between them).

An answer is `{"ok": true, ...}` or `{"ok": false, "kind": K, ...}` with K one of `type`
(the type cannot be loaded), `settings` (`problems`: every invalid setting), `units` (the
plugin's `units()` raised: `error`, `settings_error`, `traceback`), `too_many` (more units
than `limit`). Units are written one per line as canonical JSON (sorted keys, no spaces),
to a temporary name renamed to `out` once complete: the service keys them from the lines.

The host sets its own memory limit (its data segment, `RLIMIT_DATA`) before importing
anything of a plugin, ends when its standard input closes or the service dies, and loads
each type once (the bytecode of every plugin's module checked against a hash of its source,
see `simrun_harness.sources`). The service starts a new host when a plugin's files change.
"""

from __future__ import annotations

import argparse
import ctypes
import io
import json
import os
import resource
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from simrun_harness import plugin_code, sources
from simrun_harness.plugin import (
    SettingsError,
    SplitTaskType,
    TaskContext,
    TaskType,
    load_task_type,
)
from simrun_harness.reuse import canonical
from simrun_harness.settings_check import check_settings, keyed_settings

_PR_SET_PDEATHSIG = 1
ANSWER_MARK = "simrun-plugin-answer: "


class _Refused(Exception):
    """An answer that is not ok: its fields."""

    def __init__(self, kind: str, **fields: Any) -> None:
        super().__init__(kind)
        self.answer = {"ok": False, "kind": kind, **fields}


class Host:
    """The types of this environment, each loaded on first use, and the answers about them."""

    def __init__(self) -> None:
        self._types: dict[str, type[TaskType] | str] = {}

    def load(self, name: str) -> type[TaskType]:
        if name not in self._types:
            try:
                self._types[name] = load_task_type(name)
            except Exception as exc:  # a plugin's import may raise anything: named, not raised
                self._types[name] = f"{type(exc).__name__}: {exc}"
        found = self._types[name]
        if isinstance(found, str):
            raise _Refused("type", error=found)
        return found

    def describe(self, request: dict[str, Any]) -> dict[str, Any]:
        cls = self.load(request["type"])
        try:
            schema = cls.settings_schema()
            hint = cls.hint.model_dump()
        except Exception as exc:
            raise _Refused("type", error=f"{type(exc).__name__}: {exc}") from exc
        return {
            "ok": True,
            "description": cls.description or (cls.__doc__ or "").strip().split("\n")[0],
            "splittable": bool(cls.splittable),
            "ports": list(cls.ports),
            "outputs": list(cls.outputs),
            "any_port": bool(getattr(cls, "any_port", False)),
            "hint": hint,
            "settings_schema": schema,
        }

    def _settings(self, cls: type[TaskType], raw: dict[str, Any]) -> Any:
        try:
            validated, problems = check_settings(cls.settings_model, raw)
        except Exception as exc:  # the model's own validator raised something else
            raise _Refused(
                "settings", problems=[[[], f"{type(exc).__name__}: {exc}"]], raised=True
            ) from exc
        if validated is None:
            raise _Refused("settings", problems=[[list(loc), msg] for loc, msg in problems])
        return validated

    def validate(self, request: dict[str, Any]) -> dict[str, Any]:
        cls = self.load(request["type"])
        validated = self._settings(cls, request["settings"])
        return {"ok": True, "settings": keyed_settings(validated)}

    def units(self, request: dict[str, Any]) -> dict[str, Any]:
        cls = self.load(request["type"])
        if not issubclass(cls, SplitTaskType):
            raise _Refused("type", error=f"task type {request['type']!r} runs once: no units")
        settings = self._settings(cls, request["settings"])
        model_dir = request.get("model_dir")
        ctx = TaskContext(
            task_id=request["task_id"],
            settings=settings,
            model_dir=Path(model_dir) if model_dir else None,
        )
        try:
            units = cls().units(ctx)
            count = len(units)
        except MemoryError as exc:
            raise _Refused("memory", error="MemoryError", traceback=traceback.format_exc()) from exc
        except Exception as exc:  # plugin code may raise anything: its message and traceback
            settings_error = isinstance(exc, SettingsError)
            raise _Refused(
                "units",
                error=str(exc) if settings_error else f"{type(exc).__name__}: {exc}",
                settings_error=settings_error,
                traceback=traceback.format_exc(),
            ) from exc
        limit = int(request["limit"])
        if count > limit:
            raise _Refused("too_many", count=count, limit=limit)
        out = request.get("out")
        if out:
            _write_units(Path(out), units)
        return {"ok": True, "count": count}


def _write_units(out: Path, units: Any) -> None:
    """One canonical JSON line per unit, written whole under a temporary name, then renamed."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}")
    with tmp.open("w") as f:
        for unit in units:
            f.write(canonical(unit))
            f.write("\n")
    os.replace(tmp, out)


def _limit_memory(megabytes: int) -> None:
    """Cap this process's data segment (heap and private anonymous memory): a plugin that
    allocates past it gets a MemoryError here instead of taking the machine's memory."""
    if megabytes > 0:
        size = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_DATA, (size, size))


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return


def serve(requests: TextIO, answers: TextIO) -> None:
    """Answer each request line until the input closes."""
    host = Host()
    ops: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        "describe": host.describe,
        "validate": host.validate,
        "units": host.units,
        "identify": lambda request: plugin_code.identify(request["type"]),
    }
    for line in requests:
        try:
            request = json.loads(line)
            answer = ops[request["op"]](request)
        except _Refused as refused:
            answer = refused.answer
        except MemoryError:
            answer = {"ok": False, "kind": "memory", "error": "MemoryError"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def in_store(question: dict[str, Any], store: Path) -> dict[str, Any]:
    """A question of `--once` with its `model_dir` and `out` under the store at `store`."""
    found = dict(question)
    for field in ("model_dir", "out"):
        if found.get(field):
            found[field] = str(store / found[field])
    return found


def answer_once(questions: list[dict[str, Any]], store: Path, answers: TextIO) -> None:
    """Answer `questions` (paths relative to `store`), one marked line each."""
    lines = io.StringIO()
    serve(io.StringIO("".join(json.dumps(in_store(q, store)) + "\n" for q in questions)), lines)
    for line in lines.getvalue().splitlines():
        answers.write(ANSWER_MARK + line + "\n")
    answers.flush()


def parse_answers(log: str) -> list[dict[str, Any]]:
    """The answers of a `--once` host in its log, in order."""
    return [
        json.loads(line[len(ANSWER_MARK) :])
        for line in log.splitlines()
        if line.startswith(ANSWER_MARK)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memory-mb", type=int, default=0)
    parser.add_argument("--once", action="store_true", help="answer --questions and end")
    parser.add_argument("--store", default="", help="the run store (with --once)")
    parser.add_argument("--questions", default="[]", help="a JSON list (with --once)")
    args = parser.parse_args()
    if not args.once:
        _die_with_parent()
    _limit_memory(args.memory_mb)
    # a module edited in place, within a second at the same size, is run as it is on disk,
    # not from the bytecode Python would take by time and size
    sources.install([*sources.project_dirs(), *sources.plugin_places()])
    # the answers go to the standard output it was started with; anything the plugin prints
    # goes to standard error, never into an answer
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    if args.once:
        answer_once(json.loads(args.questions), Path(args.store), answers)
        return
    serve(sys.stdin, answers)


if __name__ == "__main__":
    main()

"""The processes of a `simrun serve` the soak kills and measures: every kind of process of the
installation, their memory, and what a run's files say about its units."""

from __future__ import annotations

import contextlib
import json
import os
import random
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psutil

SERVICES = ("web", "worker", "beat", "watcher")
# every kind of process the chaos kills; `serve` is killed and then started again by the soak
KINDS = ("web", "worker", "pool", "beat", "watcher", "pod", "supervisor", "standby", "serve")
POD_COMMANDS = ("simrun-worker", "simrun-merge", "simrun-exec")
SUPERVISOR = "cluster.local.supervisor"
STANDBY = "cluster.local.standby_supervisor"  # a standby pod's, and a pod's once handed one


def _state(data_dir: Path) -> dict[str, object]:
    try:
        found = json.loads((data_dir / "services.json").read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def service_pids(data_dir: Path) -> dict[str, int]:
    """The main process of each running service, from serve's services.json."""
    services = _state(data_dir).get("services", [])
    return {s["name"]: s["pid"] for s in services if s.get("pid")}  # type: ignore[union-attr]


def service_restarts(data_dir: Path) -> dict[str, int]:
    services = _state(data_dir).get("services", [])
    return {s["name"]: s["restarts"] for s in services}  # type: ignore[union-attr]


def processes_of(data_dir: Path) -> list[psutil.Process]:
    """Every live process of the installation: its SIMRUN_DATA_DIR, or a path under the data
    directory in its command line, working directory or environment (pods, supervisors,
    standbys have no SIMRUN_DATA_DIR of their own)."""
    under = f"{data_dir}{os.sep}"
    found = []
    for proc in psutil.process_iter(["environ", "cmdline", "cwd", "status", "name"]):
        if proc.pid == os.getpid() or proc.info.get("status") == psutil.STATUS_ZOMBIE:
            continue
        environ = proc.info.get("environ") or {}
        named = [*(proc.info.get("cmdline") or []), proc.info.get("cwd") or "", *environ.values()]
        if environ.get("SIMRUN_DATA_DIR") == str(data_dir) or any(under in n for n in named):
            found.append(proc)
    return found


def _line(proc: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return " ".join(proc.cmdline())
    return ""


def victims(data_dir: Path, kind: str) -> list[psutil.Process]:
    """The live processes of one kind (`KINDS`, but `serve`, which the soak kills itself)."""
    services = service_pids(data_dir)
    if kind in SERVICES:
        with contextlib.suppress(psutil.Error, KeyError):
            return [psutil.Process(services[kind])]
        return []
    if kind == "pool":  # the worker's pool processes, if its pool has any (Celery's; the
        # pod supervisors a submission started are the worker's children too, and not these)
        with contextlib.suppress(psutil.Error, KeyError):
            children = psutil.Process(services["worker"]).children()
            return [c for c in children if "celery" in _line(c)]
        return []
    mine = processes_of(data_dir)
    if kind == "pod":
        return [p for p in mine if p.info.get("name") in POD_COMMANDS]
    if kind == "supervisor":
        return attempt_supervisors(data_dir)
    if kind == "standby":  # waiting standbys: their supervisor, or the process started ahead
        ready = {
            int(path.stem)
            for path in (data_dir / "store" / "local" / "standby").glob("*/*.ready")
            if path.stem.isdigit()
        }
        return [p for p in mine if p.pid in ready]
    raise ValueError(f"unknown kind {kind!r}")


def attempt_supervisors(data_dir: Path) -> list[psutil.Process]:
    """The supervisors of the attempts still running, from each attempt's `supervisor.json`
    (pid and start time): a fresh supervisor, or a standby's once it was handed the attempt
    (most attempts are; its command line names the standby, not the supervisor)."""
    found = []
    for record in (data_dir / "store" / "runs").glob("*/pods/*/*/supervisor.json"):
        if (record.parent / "exit.json").exists():
            continue
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError, psutil.Error):
            identity = json.loads(record.read_text())
            proc = psutil.Process(int(identity["pid"]))
            if abs(proc.create_time() - float(identity["started"])) < 0.01:
                found.append(proc)
    return found


def kill_kind(data_dir: Path, kind: str, rng: random.Random) -> int | None:
    """kill -9 of a random live process of `kind`; its pid, or None when there is none."""
    found = victims(data_dir, kind)
    if not found:
        return None
    victim = rng.choice(found)
    with contextlib.suppress(psutil.Error):
        victim.kill()
        return victim.pid
    return None


class KindCycle:
    """The kinds in a new random order each round, so every kind is killed as often."""

    def __init__(self, rng: random.Random, kinds: tuple[str, ...] = KINDS) -> None:
        self.rng, self.kinds, self.todo = rng, kinds, list[str]()

    def next(self) -> str:
        if not self.todo:
            self.todo = list(self.kinds)
            self.rng.shuffle(self.todo)
        return self.todo.pop()


def tree_rss(pid: int) -> int:
    """Resident bytes of a service: its process and descendants, without pod supervisors
    and standbys (and so without their pods)."""
    total = 0
    try:
        todo = [psutil.Process(pid)]
    except psutil.Error:
        return 0
    while todo:
        proc = todo.pop()
        with contextlib.suppress(psutil.Error):
            line = " ".join(proc.cmdline())
            if SUPERVISOR in line or STANDBY in line:
                continue
            total += proc.memory_info().rss
            todo.extend(proc.children())
    return total


@dataclass
class Memory:
    """RSS samples of each service over time."""

    samples: dict[str, list[tuple[float, int]]] = field(default_factory=dict)

    def sample(self, data_dir: Path, at: float) -> None:
        for name, pid in service_pids(data_dir).items():
            rss = tree_rss(pid)
            if rss:
                self.samples.setdefault(name, []).append((at, rss))

    def tenths(self) -> dict[str, dict[str, float]]:
        """Per service: mean MiB of the first and the last tenth of the samples, and the ratio."""
        result = {}
        for name, samples in sorted(self.samples.items()):
            tenth = max(1, len(samples) // 10)
            first = statistics.mean(r for _, r in samples[:tenth]) / 2**20
            last = statistics.mean(r for _, r in samples[-tenth:]) / 2**20
            result[name] = {
                "first_mib": round(first, 1),
                "last_mib": round(last, 1),
                "ratio": round(last / first, 3),
                "samples": len(samples),
            }
        return result


def _unit_done_lines(progress: Path) -> list[dict[str, object]]:
    lines: list[dict[str, object]] = []
    text = progress.read_text() if progress.is_file() else ""
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if event.get("event") == "unit_done":
                lines.append(event)
    return lines


def first_progress(run_dir: Path) -> float | None:
    """When the run's first unit was done (epoch seconds), from its progress files."""
    times = [
        datetime.fromisoformat(str(e["time"])).timestamp()
        for progress in run_dir.glob("tasks/*/progress.jsonl")
        for e in _unit_done_lines(progress)
    ]
    return min(times) if times else None


def ledger_counts(run_dir: Path) -> tuple[int, int, int]:
    """(units, lost, done twice) of a run's split tasks: a unit is lost when the ledger does
    not have it done, done twice when the progress file has two `unit_done` lines for it."""
    units = lost = twice = 0
    for task in sorted((run_dir / "tasks").glob("*")):
        ledger = task / "ledger"
        if not (ledger / "meta.json").is_file():
            continue
        total = int(json.loads((ledger / "meta.json").read_text())["total"])
        done = len(list((ledger / "done").iterdir())) if (ledger / "done").is_dir() else 0
        units += total
        lost += total - done
        seen: dict[str, int] = {}
        for event in _unit_done_lines(task / "progress.jsonl"):
            seen[str(event["unit"])] = seen.get(str(event["unit"]), 0) + 1
        twice += sum(1 for n in seen.values() if n > 1)
    return units, lost, twice

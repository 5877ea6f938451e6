"""The processes of a `simrun serve` the soak kills and measures: services, pods, their memory."""

from __future__ import annotations

import contextlib
import json
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import psutil

SERVICES = ("web", "worker", "watcher")
POD_COMMANDS = ("simrun-worker", "simrun-merge", "simrun-exec")
SUPERVISOR = "cluster.local.supervisor"
STANDBY = "cluster.local.standby_supervisor"  # a standby pod's, and a pod's once handed one


def service_pids(data_dir: Path) -> dict[str, int]:
    """The main process of each running service, from serve's services.json."""
    try:
        state = json.loads((data_dir / "services.json").read_text())
    except (OSError, ValueError):
        return {}
    return {s["name"]: s["pid"] for s in state["services"] if s.get("pid")}


def service_restarts(data_dir: Path) -> dict[str, int]:
    try:
        state = json.loads((data_dir / "services.json").read_text())
    except (OSError, ValueError):
        return {}
    return {s["name"]: s["restarts"] for s in state["services"]}


def pod_processes(store: Path) -> list[psutil.Process]:
    """The pods' own processes (the harness and its pool), not their supervisors: by their
    name, and their run directory or working directory in the store (a pod handed to a
    standby has the SIMRUN_* variables in its environment, but not in /proc's copy of the
    environment it started with)."""
    found = []
    for proc in psutil.process_iter(["name", "environ", "cwd", "status"]):
        if proc.info.get("status") == psutil.STATUS_ZOMBIE:
            continue
        if proc.info.get("name") not in POD_COMMANDS:
            continue
        environ = proc.info.get("environ") or {}
        where = f"{environ.get('SIMRUN_RUN_DIR', '')} {proc.info.get('cwd') or ''}"
        if str(store) in where:
            found.append(proc)
    return found


def kill_one(data_dir: Path, rng: random.Random) -> str | None:
    """kill -9 of a random service or pod process; what was killed, or None."""
    services = service_pids(data_dir)
    pods = pod_processes(data_dir / "store")
    if pods and (not services or rng.random() < 0.5):
        victim = rng.choice(pods)
        what = f"pod {victim.info.get('name')}"
    elif services:
        name = rng.choice(sorted(services))
        victim, what = psutil.Process(services[name]), name
    else:
        return None
    with contextlib.suppress(psutil.Error):
        victim.kill()
        return what
    return None


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
        progress = task / "progress.jsonl"
        lines = progress.read_text().splitlines() if progress.is_file() else []
        for line in lines:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if event.get("event") == "unit_done":
                    seen[event["unit"]] = seen.get(event["unit"], 0) + 1
        twice += sum(1 for n in seen.values() if n > 1)
    return units, lost, twice

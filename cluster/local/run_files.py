"""The files of one run in the local backend, below its `pods` directory in the run store.

    <run>/pods/.launch.json      the RunLaunch and when it was submitted
    <run>/pods/.lock             held while the run advances or a pod of it starts
    <run>/pods/.stopped          the workflow was stopped (start nothing more, end extras)
    <run>/pods/.cancelled        the workflow was cancelled (end every pod)
    <run>/pods/.ended            every pod ended: nothing more to advance
    <run>/pods/<pod>/<attempt>/  one attempt (cluster/local/attempts.py)

The run's own files start with a dot, which no pod name can (`check_name`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from cluster.local.atomic_files import create_json, read_json
from cluster.local.attempts import read_attempts
from cluster.local.dag import PodView, run_views
from cluster.local.launches import launch_from_json, launch_to_json, run_pods
from runs.ports import RunLaunch
from simrun_harness.layout import RunPaths

LAUNCH_FILE = ".launch.json"
LOCK_FILE = ".lock"
STOPPED = ".stopped"
CANCELLED = ".cancelled"
ENDED = ".ended"


@dataclass(frozen=True)
class RunFiles:
    """One run's state as files."""

    paths: RunPaths

    @property
    def pods(self) -> Path:
        return self.paths.pods

    @property
    def lock(self) -> Path:
        return self.pods / LOCK_FILE

    @property
    def run_id(self) -> str:
        return self.paths.root.name

    def exists(self) -> bool:
        return (self.pods / LAUNCH_FILE).exists()

    def create(self, launch: RunLaunch) -> None:
        """Record the launch once (a second submission keeps the first)."""
        data = {"launch": launch_to_json(launch), "submitted": time.time()}
        create_json(self.pods / LAUNCH_FILE, data)

    @property
    def store_root(self) -> Path:
        """The run store (`<store>/runs/<run>`): the run's files are read below it, no link
        followed (its code may replace its `pods` directory with one)."""
        return self.paths.root.parents[1]

    def launch(self) -> tuple[RunLaunch, float]:
        """The launch and its submission time; KeyError when the run has none."""
        data = read_json(self.pods / LAUNCH_FILE, root=self.store_root)
        if data is None:
            raise KeyError(self.run_id)
        return launch_from_json(data["launch"]), float(data["submitted"])

    def mark(self, marker: str) -> None:
        """Set a marker (STOPPED, CANCELLED, ENDED) with the time, once."""
        create_json(self.pods / marker, {"at": time.time()})

    def marked_at(self, marker: str) -> float | None:
        data = read_json(self.pods / marker, root=self.store_root)
        return None if data is None else float(data["at"])

    @property
    def halted(self) -> bool:
        """Stopped or cancelled: no pod starts any more."""
        return (self.pods / STOPPED).exists() or (self.pods / CANCELLED).exists()

    @property
    def ended(self) -> bool:
        return (self.pods / ENDED).exists()

    def views(self, launch: RunLaunch) -> list[PodView]:
        """Every pod with its attempts and phase, as the files say now."""
        attempts = {s.name: read_attempts(self.pods / s.name) for s in run_pods(launch)}
        return run_views(launch, attempts, halted=self.halted)

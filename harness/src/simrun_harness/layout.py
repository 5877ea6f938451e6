"""Where everything of a run lives in the run store.

One module names every path, so the service, the backends and the pods agree. It imports
nothing but the standard library: the harness runs inside model environments without Django.

    <store>/snapshots/<digest>/...            a source snapshot (immutable)
    <store>/blobs/<aa>/<sha256>[.x]            snapshot file contents (.x: an executable copy)
    <store>/runs/<run>/run.json                the run as submitted (workflow, sources)
    <store>/runs/<run>/tasks/<task>/task.json  what a pod needs: type, settings, inputs, model
    .../tasks/<task>/ledger/{pending,claimed,done}/   the units of a split task
    .../tasks/<task>/ledger/heartbeats/<worker>@<attempt>   a worker attempt's heartbeat
    .../tasks/<task>/units/<unit>/             one unit's output
    .../tasks/<task>/progress.jsonl            one JSON line per event (unit_done ...)
    .../tasks/<task>/reports/<worker>-<attempt>.json
    .../tasks/<task>/recorded/<report name>    marker: the report became an observation
    .../tasks/<task>/logs/<pod>.log            logs kept at the task's end
    .../tasks/<task>/out/                      the task's output; out/.simrun-merged last
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MERGE_MARKER = ".simrun-merged"
TASK_FILE = "task.json"
RUN_FILE = "run.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def check_name(name: str, *, what: str) -> str:
    """Return `name` if it is safe as one path component, else raise ValueError."""
    if not _NAME.match(name) or name in {".", ".."}:
        raise ValueError(f"{what} {name!r} is not a valid name (letters, digits, _ . -)")
    return name


def report_name(worker: str, attempt: int) -> str:
    """The file name of a worker's report for one attempt."""
    return f"{worker}-{attempt}.json"


@dataclass(frozen=True)
class TaskPaths:
    """Every path of one task, below its directory in the run store."""

    root: Path

    @property
    def store_root(self) -> Path:
        """The run store this task is in (`<store>/runs/<run>/tasks/<task>`): the root below
        which its files are read without following a link (`store_reads`)."""
        return self.root.parents[3]

    @property
    def task_file(self) -> Path:
        return self.root / TASK_FILE

    @property
    def ledger(self) -> Path:
        return self.root / "ledger"

    @property
    def pending(self) -> Path:
        return self.ledger / "pending"

    @property
    def claimed(self) -> Path:
        return self.ledger / "claimed"

    @property
    def done(self) -> Path:
        return self.ledger / "done"

    @property
    def heartbeats(self) -> Path:
        return self.ledger / "heartbeats"

    @property
    def memory_kills(self) -> Path:
        return self.ledger / "memory_kills"

    @property
    def units(self) -> Path:
        return self.root / "units"

    def unit_dir(self, unit: str) -> Path:
        return self.units / unit

    @property
    def progress(self) -> Path:
        return self.root / "progress.jsonl"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    def report(self, worker: str, attempt: int) -> Path:
        return self.reports / report_name(worker, attempt)

    @property
    def recorded(self) -> Path:
        return self.root / "recorded"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def log(self, pod: str) -> Path:
        return self.logs / f"{pod}.log"

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def merge_marker(self) -> Path:
        return self.out / MERGE_MARKER


@dataclass(frozen=True)
class RunPaths:
    """Every path of one run."""

    root: Path

    @property
    def run_file(self) -> Path:
        return self.root / RUN_FILE

    @property
    def tasks(self) -> Path:
        return self.root / "tasks"

    def task(self, task_id: str) -> TaskPaths:
        return TaskPaths(self.tasks / check_name(task_id, what="task id"))

    @property
    def pods(self) -> Path:
        """Where a backend keeps its per-pod state files (the local backend)."""
        return self.root / "pods"


@dataclass(frozen=True)
class StorePaths:
    """The run store's top level."""

    root: Path

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    def run(self, run_id: str) -> RunPaths:
        return RunPaths(self.runs / check_name(run_id, what="run id"))

    @property
    def snapshots(self) -> Path:
        return self.root / "snapshots"

    def snapshot(self, digest: str) -> Path:
        return self.snapshots / check_name(digest, what="snapshot digest")

    @property
    def blobs(self) -> Path:
        return self.root / "blobs"

    def blob(self, sha256: str, *, executable: bool = False) -> Path:
        """The stored content (read-only), or its executable copy: a hard link shares its
        file's mode, so an executable file of a snapshot links to a copy of its own."""
        return self.blobs / sha256[:2] / (f"{sha256}.x" if executable else sha256)

    @property
    def environments(self) -> Path:
        """Local virtual environments of models, by digest (the local backend)."""
        return self.root / "environments"

    @property
    def uploads(self) -> Path:
        """Spool directory for uploads, on the same file system as the snapshots."""
        return self.root / "tmp"

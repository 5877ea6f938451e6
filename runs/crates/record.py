"""What a crate records of a run, as plain values: read from the database and the store by
`runs.selectors.crates`, turned into RO-Crate metadata by `runs.crates.metadata`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class StoredFile:
    """A file of the store the crate holds: where in the crate, where in the store (relative
    to its root; read without following links), and its size as listed."""

    crate_path: str
    store_path: str
    size: int


@dataclass(frozen=True)
class MadeFile:
    """A file the export writes itself (the workflow, the environment's lock)."""

    crate_path: str
    data: bytes


@dataclass(frozen=True)
class Written:
    """A file as it went into the crate (or, metadata only, as it was read)."""

    sha256: str
    size: int


@dataclass(frozen=True)
class Who:
    """The identity that submitted a run; `acts_for`: an agent's person."""

    name: str
    kind: str
    acts_for: str = ""


@dataclass(frozen=True)
class Tool:
    """A task type as the run used it: its plugin package, version and code digest."""

    type: str
    package: str
    version: str
    digest: str
    description: str
    as_used: bool = True
    """False: the version and digest are those installed when the crate was made (the run
    recorded none), as for simrun's own `command`."""


@dataclass(frozen=True)
class SnapshotRecord:
    digest: str
    name: str
    git_remote: str
    git_commit: str
    git_dirty: bool | None
    files: list[StoredFile]


@dataclass(frozen=True)
class TaskRecord:
    task_id: str
    position: int
    type: str
    splittable: bool
    settings: dict[str, Any]
    inputs: dict[str, str]
    dependencies: list[str]
    state: str
    message: str
    started_at: datetime | None
    ended_at: datetime | None
    units_total: int | None
    reused: dict[str, list[Any]]
    """Units reused, by earlier run: [start, end) ranges of unit indices, unit names, or
    ["out"] (runs/reuse_plans.py)."""
    resources: dict[str, Any]
    usage: dict[str, float]
    outputs: list[StoredFile]
    logs: list[StoredFile]


@dataclass(frozen=True)
class EnvironmentRecord:
    """The environment the run's pods used: its digest, Python, harness and lock files."""

    ref: str
    python: str
    harness: str
    files: list[MadeFile]
    local_packages: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class RunRecord:
    id: str
    name: str
    description: str
    state: str
    message: str
    group: str
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    who: Who
    workflow: MadeFile
    snapshots: list[SnapshotRecord]
    tasks: list[TaskRecord]
    tools: dict[str, Tool]
    environment: EnvironmentRecord
    simrun_version: str
    from_crate: str = ""
    resume_from: str = ""

    def files(self) -> list[StoredFile | MadeFile]:
        """Every file the crate describes, in the order it is written."""
        found: list[StoredFile | MadeFile] = [self.workflow, *self.environment.files]
        for snapshot in self.snapshots:
            found += snapshot.files
        for task in self.tasks:
            found += task.outputs + task.logs
        return found

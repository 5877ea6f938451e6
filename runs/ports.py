"""The port of the domain: the one protocol both backends implement, and the plain values
it speaks.

It lives beside the domain (it imports only plain domain values) and `cluster/` implements
it; the controller, the services and the selectors only ever see these types. A run is launched as a
`RunLaunch` (its tasks in topological order, each with its plan); its progress is read back
as a `BackendStatus` keyed by pod names relative to the run:

- an unsplit task `<task>`;
- a split task: the coordinator `<task>-w0`, extra workers `<task>-w1`…, the merge
  `<task>-merge` (absent when the coordinator merges).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO, Protocol, runtime_checkable

from runs.plans import Node, TaskPlan


class PodPhase(StrEnum):
    """Where one pod (all attempts of one worker, merge or unsplit task) stands."""

    WAITING = "waiting"  # not created yet: its dependencies have not finished
    QUEUED = "queued"  # created, waiting for admission or resources
    RUNNING = "running"
    PREEMPTED = "preempted"  # an evicted attempt waits for its retry
    RETRYING = "retrying"  # an attempt that failed otherwise waits for its retry
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # failed after the retries the backend makes
    SKIPPED = "skipped"  # never ran (its workflow stopped or a dependency failed)


ENDED_PHASES = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED, PodPhase.SKIPPED})


class WorkflowPhase(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"  # stopped or cancelled


@dataclass(frozen=True)
class AttemptFailure:
    """One failed attempt of a pod: its exit code (None when it has none) and OOM evidence."""

    attempt: int
    exit_code: int | None
    oom_killed: bool = False
    message: str = ""


@dataclass(frozen=True)
class PodStatus:
    name: str
    phase: PodPhase
    attempts: int = 0
    node: str | None = None
    exit_code: int | None = None
    message: str = ""


@dataclass(frozen=True)
class BackendStatus:
    """A workflow as the backend sees it.

    `unreadable`: why the backend cannot read the workflow's pods now (e.g. Argo offloaded
    its node status and no Argo server is configured); `pods` and `failures` are then empty
    and mean nothing: the controller keeps the run as it is and shows this as its message."""

    phase: WorkflowPhase
    pods: Mapping[str, PodStatus] = field(default_factory=dict)
    failures: Mapping[str, list[AttemptFailure]] = field(default_factory=dict)
    message: str = ""
    unreadable: str = ""


@dataclass(frozen=True)
class TaskLaunch:
    """One task of a run as a backend starts it."""

    task_id: str
    type: str
    splittable: bool
    dependencies: tuple[str, ...]
    plan: TaskPlan
    command: tuple[str, ...] | None = None  # the built-in `command` type: its args
    image: str | None = None  # the image of a `command` task (cluster)
    env: Mapping[str, str] = field(default_factory=dict)  # extra environment


@dataclass(frozen=True)
class RunLaunch:
    """Everything a backend needs to create a run's workflow."""

    run_id: str
    workflow_name: str
    tasks: tuple[TaskLaunch, ...]
    environment: str  # image reference (cluster) or environment digest (local)
    group: str = ""
    reserve: str | None = None
    grace_s: int = 30

    def task(self, task_id: str) -> TaskLaunch:
        return next(t for t in self.tasks if t.task_id == task_id)


@dataclass(frozen=True)
class Placement:
    """A live pod of a run, on a node, with what it requests."""

    run_id: str | None
    task_id: str
    pod: str
    node: str | None
    phase: str
    cores: float
    memory_gb: float


@dataclass(frozen=True)
class PodLog:
    """The log of one attempt of one pod, or why it cannot be read."""

    pod: str
    attempt: int
    text: str = ""
    ended: bool = False
    error: str | None = None
    truncated: bool = False


LOG_LIMIT_BYTES = 4 * 1024 * 1024
LOG_BLOCK = 64 * 1024


def _tail_bytes(handle: BinaryIO, lines: int, limit: int) -> bytes:
    """The bytes of the last `lines` lines, reading backwards no more than needed."""
    end = handle.seek(0, os.SEEK_END)
    data = b""
    position = end
    while position > 0:
        step = min(LOG_BLOCK, position)
        position -= step
        handle.seek(position)
        data = handle.read(step) + data
        # one newline more than the lines wanted (a final newline ends the last line)
        if data.count(b"\n") > lines or len(data) > limit + LOG_BLOCK * 4:
            break
    if lines <= 0:
        return b""
    parts = data.splitlines(keepends=True)
    return b"".join(parts[-lines:])


def read_log(
    handle: BinaryIO, tail_lines: int | None, limit: int = LOG_LIMIT_BYTES
) -> tuple[str, bool]:
    """The text of an open log file and whether it was cut at `limit` bytes: how a backend
    reads its pods' logs, and how the service reads the logs kept in the store (both open
    the file without following a link: `simrun_harness.store_reads`). The handle is closed.

    Without `tail_lines` the first `limit` bytes; with it, the first `limit` bytes of its
    last `tail_lines` lines.
    """
    with handle:
        if tail_lines is None:
            data = handle.read(limit + 1)
        else:
            data = _tail_bytes(handle, tail_lines, limit)
    truncated = len(data) > limit
    return data[:limit].decode("utf-8", errors="replace"), truncated


@dataclass(frozen=True)
class Changes:
    """What `Backend.changes` answers: the workflows whose status may have changed (None: the
    backend cannot say, read them all), and the mark to ask with next time."""

    names: frozenset[str] | None
    mark: Hashable | None = None


UNKNOWN_CHANGES = Changes(None)


class PluginHostFailed(RuntimeError):
    """A plugin host in a model's environment gave no answers: it did not start, failed or
    did not end in time (the message says which, with the end of its log); nothing of it is
    left running."""


@runtime_checkable
class Backend(Protocol):
    """Where runs execute. Every method may block on I/O; none is called under a row lock."""

    def submit(self, launch: RunLaunch) -> str:
        """Create the run's workflow; returns its name. An existing one counts as submitted."""

    def status(self, name: str) -> BackendStatus:
        """The workflow's status; KeyError when it does not exist."""

    def statuses(
        self, names: Collection[str], *, may_reuse: Collection[str] = ()
    ) -> dict[str, BackendStatus | None]:
        """The status of many workflows in one read (what a reconcile tick asks): each name
        read maps to its status, or to None when the workflow does not exist; a name that
        cannot be read now (a broken record) is left out and logged. An error of the read as
        a whole (the API server gone) is raised. For names in `may_reuse` the backend may
        answer what it last observed itself (its own loop), never older than what it answered
        this process before; the others are read now. A mapping as `may_reuse` gives per
        name a time (ns since the epoch, 0 for none) the backend's observation must have
        begun after: a process that has answered nothing yet may then reuse what its loop
        observed after the record was last written (the first tick after a restart)."""

    def revisions(self, names: Collection[str]) -> dict[str, str] | None:
        """What each named workflow that exists was last written at (Argo: its
        resourceVersion), in one read far cheaper than `statuses`: a workflow at the same
        revision has the same status, so a tick reads only the statuses of the others, and a
        restarted one none of a workflow at the revision its record notes. None from a backend
        without revisions (its `statuses` are answered from what it observed itself)."""

    def changes(self, since: Hashable | None) -> Changes:
        """The workflows whose status may have changed since the backend answered `since`
        (the mark of an earlier answer; None: never asked), and the mark of this answer, to
        ask with next. A tick then reads the statuses of those only. `Changes.names` is None
        when the backend cannot say (a mark it does not know, no loop of its own observing
        the workflows): every status is read then.

        The mark is taken before the statuses are read: a change between the two is named
        again at the next call, so none is missed."""

    def cancel(self, name: str) -> None:
        """Terminate a workflow and its pods now; KeyError when it does not exist."""

    def stop(self, name: str) -> None:
        """Stop a decided workflow: pods still waiting go away; KeyError when gone."""

    def logs(self, name: str, task_id: str, tail_lines: int | None = None) -> list[PodLog]:
        """The logs of a task's pods, every attempt, oldest first."""

    def nodes(self) -> list[Node]:
        """The nodes runs can use, with their capacity for runs and reservations."""

    def placements(self) -> list[Placement]:
        """The live pods of runs."""

    def reserve(self, node: str, run_id: str) -> None:
        """Reserve a node for a run; KeyError for an unknown node."""

    def unreserve(self, node: str, run_id: str) -> None:
        """Release the run's reservation of a node; KeyError for an unknown node."""

    def build_image(self, context: Mapping[str, bytes], ref: str) -> None:
        """Build an environment from a flat context of files; RuntimeError with its log tail."""

    def has_image(self, ref: str) -> bool:
        """Whether the environment `ref` exists."""

    def ask_plugin_host(
        self,
        environment: str,
        questions: Sequence[Mapping[str, Any]],
        *,
        timeout_s: float,
        memory_mb: int,
    ) -> list[dict[str, Any]]:
        """The answers, one per question in order, of a plugin host run once in the built
        environment `environment` (its virtual environment here, a pod of its image on a
        cluster): `simrun_harness.plugin_host`'s questions, their `model_dir` and `out`
        relative to the run store. PluginHostFailed when it gave none within `timeout_s`."""

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call `callback` (from another thread) whenever a workflow changes."""

    def close(self) -> None:
        """Stop background threads."""


@dataclass(frozen=True)
class StoreLocation:
    """Where the run store is as the service sees it, and as the pods see it."""

    service_root: Path
    pod_root: Path


def tell_subscribers(callbacks: Iterable[Callable[[], None]], *, what: str) -> None:
    """Call every subscriber of a backend; one that raises is logged, the others still run."""
    for callback in list(callbacks):
        try:
            callback()
        except Exception:
            logging.getLogger(__name__).exception("a subscriber of %s failed", what)

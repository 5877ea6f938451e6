"""The states of a run and of its tasks (docs/architecture.md): one vocabulary for the rows,
the controller's rules, the selectors, the pages, the API and the CLI.

Each member is a `str`, so a state compares equal to the text stored in the row and sent
in JSON; no module spells a state as bare text.
"""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    SUBMITTING = "submitting"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @classmethod
    def live(cls) -> tuple[RunState, ...]:
        return (cls.SUBMITTING, cls.QUEUED, cls.RUNNING)

    @classmethod
    def ended(cls) -> tuple[RunState, ...]:
        return (cls.SUCCEEDED, cls.FAILED, cls.CANCELLED)

    @classmethod
    def choices(cls) -> list[tuple[str, str]]:
        """(value, label) pairs for a model's or a form's field."""
        return [(state.value, state.name.title()) for state in cls]


class TaskState(StrEnum):
    WAITING = "waiting"  # no pods yet
    QUEUED = "queued"  # pods, none running
    RUNNING = "running"
    PREEMPTED = "preempted"  # none running: an evicted pod waits for its retry
    RETRYING = "retrying"  # a pod that failed otherwise waits for its retry
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"  # still open when its run ended (cancelled, or failed by another)

    @classmethod
    def final(cls) -> tuple[TaskState, ...]:
        return (cls.DONE, cls.FAILED, cls.SKIPPED, cls.CANCELLED)

    @classmethod
    def live(cls) -> tuple[TaskState, ...]:
        """Pods exist and the task is not over."""
        return (cls.RUNNING, cls.PREEMPTED, cls.RETRYING, cls.QUEUED)

    @classmethod
    def choices(cls) -> list[tuple[str, str]]:
        """(value, label) pairs for a model's or a form's field."""
        return [(state.value, state.name.title()) for state in cls]

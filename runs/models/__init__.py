"""The records of simrun. Status lives in these rows: pages and the API read them, never Celery."""

from runs.models.heartbeat import Heartbeat
from runs.models.identity import Identity, IdentityKind, Token
from runs.models.observation import ResourceObservation
from runs.models.run import Run, RunState, Task, TaskState
from runs.models.snapshot import Snapshot

__all__ = [
    "Heartbeat",
    "Identity",
    "IdentityKind",
    "ResourceObservation",
    "Run",
    "RunState",
    "Snapshot",
    "Task",
    "TaskState",
    "Token",
]

"""The records of simrun. Status lives in these rows: pages and the API read them, never Celery."""

from runs.models.heartbeat import Heartbeat
from runs.models.identity import Identity, IdentityKind, SubmissionQueue, Token
from runs.models.observation import ResourceObservation
from runs.models.run import (
    MergePending,
    OomKills,
    Run,
    RunEnvironment,
    StoredPod,
    Task,
)
from runs.models.snapshot import Snapshot

__all__ = [
    "Heartbeat",
    "Identity",
    "IdentityKind",
    "MergePending",
    "OomKills",
    "ResourceObservation",
    "Run",
    "RunEnvironment",
    "Snapshot",
    "StoredPod",
    "SubmissionQueue",
    "Task",
    "Token",
]

"""The port as the adapters name it: the `Backend` protocol and the values it speaks live
beside the domain, in `runs/ports.py`; the backends here implement it."""

from runs.ports import (
    ENDED_PHASES,
    LOG_LIMIT_BYTES,
    AttemptFailure,
    Backend,
    BackendStatus,
    Placement,
    PodLog,
    PodPhase,
    PodStatus,
    RunLaunch,
    StoreLocation,
    TaskLaunch,
    WorkflowPhase,
    read_log,
    tell_subscribers,
)

__all__ = [
    "ENDED_PHASES",
    "LOG_LIMIT_BYTES",
    "AttemptFailure",
    "Backend",
    "BackendStatus",
    "Placement",
    "PodLog",
    "PodPhase",
    "PodStatus",
    "RunLaunch",
    "StoreLocation",
    "TaskLaunch",
    "WorkflowPhase",
    "read_log",
    "tell_subscribers",
]

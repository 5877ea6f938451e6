"""What the domain refuses, raised by services and selectors alike; every surface maps each
to its answer (the API: 404, 409, 403, 400; the pages and the CLI: a message)."""

from __future__ import annotations


class RunNotFound(LookupError):
    """No such run (or not one this identity may see)."""


class RunConflict(ValueError):
    """The run is in a state that does not allow this."""


class NotAllowed(PermissionError):
    """The identity may read the run but not change it."""


class SubmissionRefused(ValueError):
    """A submission that cannot be accepted; the message says what to change."""


class SubmissionThrottled(SubmissionRefused):
    """An identity is at its limit of runs in submission or of submissions a minute
    (runs/services/fair_share.py); `retry_after_s`: when trying again may succeed."""

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s

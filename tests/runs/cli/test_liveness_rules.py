"""When a service counts as making no progress: plain values."""

from __future__ import annotations

from runs.cli.liveness import STARTUP_S, Sign, overdue


def test_a_service_with_a_recent_sign_is_not_overdue() -> None:
    sign = Sign(at=1000.0, what="answered a ping")
    assert overdue(since=900.0, sign=sign, now=1100.0, deadline_s=120) is None


def test_a_service_silent_past_the_deadline_is_overdue_by_its_silence() -> None:
    sign = Sign(at=1000.0, what="reconciled")
    assert overdue(since=900.0, sign=sign, now=1121.0, deadline_s=120) == 121.0


def test_a_sign_from_before_the_start_is_not_the_new_process_s() -> None:
    """A stamp the killed process left is older than its successor's start: the successor
    has the start-up allowance, counted from its start."""
    old = Sign(at=800.0, what="ticked")
    assert overdue(since=900.0, sign=old, now=900.0 + STARTUP_S - 1, deadline_s=10) is None
    assert overdue(since=900.0, sign=old, now=900.0 + STARTUP_S + 1, deadline_s=10) == STARTUP_S + 1


def test_before_its_first_sign_a_service_has_the_longer_of_deadline_and_startup() -> None:
    assert overdue(since=0.0, sign=None, now=STARTUP_S + 5, deadline_s=120) is None
    assert overdue(since=0.0, sign=None, now=121.0, deadline_s=120) == 121.0

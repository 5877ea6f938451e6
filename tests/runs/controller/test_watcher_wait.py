"""`simrun watch` waits for the backend's ring: at the poll interval while it follows runs,
at the idle poll with none to follow (an idle service wakes once a minute)."""

from __future__ import annotations

from pytest_django import Settings

from runs.controller.watcher import watch_wait_s


def test_the_watcher_polls_while_it_follows_runs_and_waits_for_rings_when_it_follows_none(
    settings: Settings,
) -> None:
    settings.SIMRUN_POLL_S = 2.0
    settings.SIMRUN_IDLE_POLL_S = 60.0
    settings.SIMRUN_LIVENESS_S = 120.0

    assert watch_wait_s(3) == 2.0
    assert watch_wait_s(0) == 60.0
    settings.SIMRUN_LIVENESS_S = 30.0  # serve restarts a watcher silent this long
    assert watch_wait_s(0) == 15.0

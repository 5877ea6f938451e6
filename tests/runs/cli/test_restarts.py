"""When serve restarts a service and when it gives up (`runs.cli.restarts`): plain values."""

from __future__ import annotations

from runs.cli.restarts import CrashHistory, RestartPolicy


def test_the_delay_doubles_with_each_crash_in_a_row_up_to_the_most() -> None:
    history = CrashHistory(RestartPolicy(burst=100, window_s=1))
    delays = [history.crashed(at=t * 10.0, up_for=1.0) for t in range(8)]

    assert delays == [1, 2, 4, 8, 16, 30, 30, 30]


def test_a_service_that_stayed_up_waits_the_first_delay_again() -> None:
    history = CrashHistory(RestartPolicy())
    assert history.crashed(at=0.0, up_for=1.0) == 1
    assert history.crashed(at=2.0, up_for=1.0) == 2

    assert history.crashed(at=200.0, up_for=120.0) == 1


def test_more_crashes_than_the_burst_within_the_window_give_up() -> None:
    history = CrashHistory(RestartPolicy(burst=3, window_s=60))
    assert [history.crashed(at=t, up_for=1.0) for t in (0.0, 10.0, 20.0)] == [1, 2, 4]

    assert history.crashed(at=30.0, up_for=1.0) is None


def test_crashes_older_than_the_window_do_not_count() -> None:
    history = CrashHistory(RestartPolicy(burst=2, window_s=60))
    history.crashed(at=0.0, up_for=1.0)
    history.crashed(at=10.0, up_for=1.0)

    assert history.crashed(at=65.0, up_for=1.0) is not None

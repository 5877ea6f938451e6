"""The lines a failing run's backoff logs (runs/controller/backoff.py), with a clock of plain
values: what an operator reads of a run the controller cannot reconcile. Gaps found by
mutation testing (docs/testing.md); the waits are `test_tick.py`'s."""

from __future__ import annotations

import logging

import pytest

from runs.controller.backoff import Backoff


def test_each_failure_says_its_count_error_and_wait_the_first_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One line a failure, naming the run, how many in a row, the error and
    when it is tried again; only the first carries the traceback; a line when it works."""
    caplog.set_level(logging.INFO, logger="runs.controller.tick")
    backoff = Backoff(clock=lambda: 0.0)
    error = ValueError("task 'hello': its plan has no shape")

    backoff.failed("r1", error, first_wait_s=2.0)
    backoff.failed("r1", error, first_wait_s=2.0)
    backoff.succeeded("r1")

    first, second, again = caplog.records
    assert first.getMessage() == (
        "reconciling run r1 failed (1 in a row: ValueError: task 'hello': its plan has no "
        "shape); tried again in 2s"
    )
    assert first.exc_info is not None and first.exc_info[1] is error
    assert second.getMessage().startswith("reconciling run r1 failed (2 in a row: ValueError")
    assert second.getMessage().endswith("tried again in 4s")
    assert second.exc_info is None
    assert again.getMessage() == "run r1 reconciles again after 2 failures"

"""What a failed pod's verdict names: the attempt and exit code, and the cause in its message.

Gaps found by mutation testing (docs/testing.md): `failure_cause` had no test among the
rules' fast tests (only reconcile's reach it), and no test read a verdict's attempt and exit
code.
"""

from __future__ import annotations

from runs.controller import rules
from runs.ports import AttemptFailure
from simrun_harness.exits import EXIT_STORE

TRACE = "Traceback (most recent call last):\n  File x\nValueError: bad input\n\n"


def test_an_exit_fails_the_task_naming_its_attempt_and_code() -> None:
    """C7: after a preemption (no code), the attempt that exited 2 is the one named."""
    failures = [AttemptFailure(0, None), AttemptFailure(1, 2, message="main: Error")]
    verdict = rules.fatal_failure("t", failures, oom_attempts=frozenset(), retry_memory_gb=1)
    assert verdict == rules.Verdict("t", "pod t failed with exit code 2", 1, 2)


def test_the_cause_is_the_stores_refusal_or_the_last_line_of_the_error() -> None:
    def cause(exit_code: int | None, error: str | None, unit: str | None = None) -> str:
        verdict = rules.Verdict("t", "failed", 0, exit_code)
        return rules.failure_cause(verdict, error=error, unit=unit, task_dir="/store/t")

    assert cause(EXIT_STORE, TRACE) == "the store is not writable: /store/t"
    assert cause(1, TRACE) == "ValueError: bad input"
    assert cause(1, TRACE, "u000007") == "unit u000007 raised ValueError: bad input"
    assert cause(1, "one line") == "one line"
    assert cause(1, None) == ""
    assert cause(1, "") == ""
    assert cause(1, "  \n") == "  \n"

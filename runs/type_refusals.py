"""What asking a task type can refuse: the type itself, its settings, or its units.

The service's catalog of types (`runs.task_types`) raises these; validation, planning and
the reuse preview turn each into the error a user reads.
"""

from __future__ import annotations

from simrun_harness.settings_check import Problem


class TypeUnavailable(KeyError):
    """A type that cannot be used: unknown, defined twice, its plugin failed to load or its
    host did not answer. A KeyError, so `types.get(name)` is None; `str()` is the message."""

    def __str__(self) -> str:
        return str(self.args[0])


class SettingsInvalid(ValueError):
    """Settings the type's model refuses: every problem, (location, message)."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(m for _, m in problems))
        self.problems = problems


class UnitsFailed(ValueError):
    """The type's `units()` raised: its message (naming the plugin) and its traceback."""

    def __init__(self, message: str, *, traceback: str = "", settings_error: bool = False):
        super().__init__(message)
        self.traceback = traceback
        self.settings_error = settings_error


class TooManyUnits(ValueError):
    """More units than a task may have (SIMRUN_MAX_UNITS_PER_TASK)."""

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(f"{count:,} units, more than the {limit:,} a task may have")
        self.count = count
        self.limit = limit

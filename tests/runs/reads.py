"""A count of what the progress-line views parse, for tests of what they read again."""

from __future__ import annotations

import pytest

from runs.selectors.progress_lines import UnitLines


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes of lines each `UnitLines.read` parses from now on, in order."""
    read: list[int] = []
    real = UnitLines.read

    def counted(self: UnitLines, data: bytes) -> None:
        read.append(len(data))
        real(self, data)

    monkeypatch.setattr(UnitLines, "read", counted)
    return read

"""Creating the ledger when another coordinator wins the race, and without hard links.

Gaps found by mutation testing (docs/testing.md): both branches need a rival or a file system
this machine does not have, so the rival creates its ledger while ours is being filled, and
`os.link` fails as it does on such a file system.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from simrun_harness import ledger_creation
from simrun_harness.layout import TaskPaths
from simrun_harness.ledger import Holder, Ledger, unit_names
from simrun_harness.ledger_creation import create_ledger
from simrun_harness.ledger_reads import read_units


def test_a_coordinator_that_loses_the_creation_race_keeps_the_winners_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two coordinators create at once: the one whose rename comes second gets False,
    leaves no temporary directory and the winner's units stand."""
    paths = TaskPaths(tmp_path / "task")
    fill = ledger_creation._fill_pending

    def rival_wins_meanwhile(ledger: Path, names: list[str]) -> None:
        fill(ledger, names)
        monkeypatch.setattr(ledger_creation, "_fill_pending", fill)
        assert create_ledger(paths, ["rival"], Holder("t-w0", 1))

    monkeypatch.setattr(ledger_creation, "_fill_pending", rival_wins_meanwhile)

    assert create_ledger(paths, ["mine", "too"], Holder("t-w0", 0)) is False
    assert read_units(paths) == ["rival"]
    assert [n for n in os.listdir(paths.root) if n.startswith(".ledger")] == []


def test_a_rename_that_fails_for_another_reason_is_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a lost race (no ledger after it): the error is the caller's, nothing is left."""
    paths = TaskPaths(tmp_path / "task")

    def refused(source: str, target: str) -> None:
        raise PermissionError(errno.EACCES, "refused", target)

    monkeypatch.setattr(ledger_creation.os, "rename", refused)
    with pytest.raises(PermissionError):
        create_ledger(paths, [1], Holder("t-w0", 0))
    monkeypatch.undo()
    assert os.listdir(paths.root) == ["units"]


@pytest.mark.parametrize("code", [errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK])
def test_without_hard_links_every_pending_unit_is_a_file_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """A file system without hard links (or out of them) gets one empty file per unit,
    each claimable once."""

    def no_links(source: str, target: str) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(ledger_creation.os, "link", no_links)
    paths = TaskPaths(tmp_path / "task")
    assert create_ledger(paths, list(range(4)), Holder("t-w0", 0))
    monkeypatch.undo()

    stats = [os.stat(paths.pending / name) for name in unit_names(4)]
    assert len({st.st_ino for st in stats}) == 4
    assert all(st.st_size == 0 and st.st_nlink == 1 for st in stats)
    ledger = Ledger(paths, Holder("t-w1", 0))
    assert sorted(n for n in iter(ledger.claim, None) if n) == unit_names(4)


def test_another_link_error_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(source: str, target: str) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(ledger_creation.os, "link", broken)
    with pytest.raises(OSError, match="I/O error"):
        create_ledger(TaskPaths(tmp_path / "task"), [1, 2], Holder("t-w0", 0))

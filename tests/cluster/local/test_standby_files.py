"""A standby's claim (by a launcher) and its withdrawal (by itself) exclude each other: whoever
renames its `.ready` first decides, so no attempt is handed to a standby that is going away."""

from __future__ import annotations

import os
from pathlib import Path

from cluster.local.atomic_files import write_json
from cluster.local.attempts import ProcessId
from cluster.local.standby import Standbys
from cluster.local.standby_files import StandbyFiles

ENV = {"PATH": "/usr/bin", "PYTHONUNBUFFERED": "1"}


def claimable(directory: Path, pid: int) -> tuple[StandbyFiles, int]:
    """The files of a standby supervisor `pid` (a live process) and its FIFO's read end."""
    files = StandbyFiles(directory, pid)
    os.mkfifo(files.fifo)
    reader = os.open(files.fifo, os.O_RDWR | os.O_NONBLOCK)
    ready = {**ProcessId.of(pid).to_json(), "env": ENV, "fifo": str(files.fifo)}
    write_json(files.ready, ready)
    return files, reader


def test_a_claimed_standby_cannot_withdraw_and_a_withdrawn_one_cannot_be_claimed(
    tmp_path: Path,
) -> None:
    standbys = Standbys(tmp_path, count=1, bin_of=lambda name: tmp_path)
    directory = tmp_path / "env"
    directory.mkdir()
    attempt = tmp_path / "attempt"

    files, reader = claimable(directory, os.getpid())
    claimed = standbys.claim("env", attempt, {**ENV, "SIMRUN_RUN": "r1"})
    assert claimed == ProcessId.of(os.getpid())
    assert os.read(reader, 4096) == f"{attempt}\n".encode()
    assert files.withdraw() is False  # claimed first: it runs that attempt

    files.remove()
    other, _ = claimable(directory, os.getppid())
    assert other.withdraw() is True
    assert standbys.claim("env", attempt, ENV) is None


def test_an_attempt_whose_environment_differs_is_not_handed_to_the_standby(
    tmp_path: Path,
) -> None:
    """Beyond the attempt's SIMRUN_* variables the pod's environment must be the standby's."""
    standbys = Standbys(tmp_path, count=1, bin_of=lambda name: tmp_path)
    (tmp_path / "env").mkdir()
    files, _ = claimable(tmp_path / "env", os.getpid())
    assert standbys.claim("env", tmp_path / "a", {**ENV, "OMP_NUM_THREADS": "1"}) is None
    assert files.ready.exists()

"""The files of the local backend's standbys, one directory per environment.

    <state>/standby/.lock                    held while standbys are started and ended
    <state>/standby/<env>/used               touched at every launch of a harness pod of env
    <state>/standby/<env>/failed             a standby that ended before it was ready: why
    <state>/standby/<env>/<pid>.json         the standby supervisor <pid> (pid, start time)
    <state>/standby/<env>/<pid>.ready        it can be claimed: what a launcher needs for that
    <state>/standby/<env>/<pid>.imported     its pod process has imported what it imports
    <state>/standby/<env>/<pid>.claimed      a launcher took it (renamed from .ready)
    <state>/standby/<env>/<pid>.fifo         where that launcher writes the attempt directory
    <state>/standby/<env>/<pid>.log          the standby process's output until it has work
    <state>/standby/<env>/<pid>.supervisor.log  the supervisor's own, until then

Whoever renames `<pid>.ready` away first decides what the standby becomes: a launcher
(`.claimed`: the standby runs its attempt) or the supervisor itself when it ends (nobody can
take it any more). So no attempt is handed to a standby that is going away.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

USED_FILE = "used"
FAILED_FILE = "failed"
LOCK_FILE = ".lock"


@dataclass(frozen=True)
class StandbyFiles:
    """The files of the standby supervisor `pid` in `directory` (its environment's)."""

    directory: Path
    pid: int

    def _named(self, suffix: str) -> Path:
        return self.directory / f"{self.pid}.{suffix}"

    @property
    def identity(self) -> Path:
        return self._named("json")

    @property
    def ready(self) -> Path:
        return self._named("ready")

    @property
    def imported(self) -> Path:
        return self._named("imported")

    @property
    def claimed(self) -> Path:
        return self._named("claimed")

    @property
    def fifo(self) -> Path:
        return self._named("fifo")

    @property
    def log(self) -> Path:
        return self._named("log")

    @property
    def supervisor_log(self) -> Path:
        return self._named("supervisor.log")

    def withdraw(self) -> bool:
        """Make the standby unclaimable; False when a launcher claimed it first."""
        try:
            os.rename(self.ready, self._named("withdrawn"))
        except FileNotFoundError:
            return not self.claimed.exists()
        self._named("withdrawn").unlink(missing_ok=True)
        return True

    def remove(self, *, keep_logs: bool = False) -> None:
        """Remove the standby's files (its logs too unless `keep_logs`)."""
        names = ["json", "ready", "imported", "claimed", "fifo", "withdrawn"]
        if not keep_logs:
            names += ["log", "supervisor.log"]
        for suffix in names:
            with contextlib.suppress(OSError):
                self._named(suffix).unlink()


def files_of(path: Path) -> StandbyFiles | None:
    """The standby a file `<pid>.<suffix>` belongs to; None for another file."""
    stem = path.name.split(".", 1)[0]
    return StandbyFiles(path.parent, int(stem)) if stem.isdigit() else None

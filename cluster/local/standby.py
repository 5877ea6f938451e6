"""Standby pods: one pod process per recently used environment, started and imported ahead.

A fresh pod process costs an interpreter and its imports (pydantic, the harness, the plugin:
~0.2 CPU s, most of the time from a submission to its first unit done). So the local backend
keeps, for each of the `count` environments whose harness pods were launched most recently,
one standby: a supervisor (`cluster.local.standby_supervisor`) with its pod process already
started and imported (`simrun_harness.standby`), waiting. A launch of a harness pod of that
environment claims it (`claim`) and hands it the attempt: the supervisor becomes the
attempt's supervisor, the process its pod, as if both had been started for it. A pass of the
backend's loop (`keep`) then starts the next one in the background.

- Only the process that runs the backend's loop (the watcher) starts standbys; any process
  that launches claims them through the files (cluster/local/standby_files.py), so there is
  at most one per environment, and none where no loop runs.
- A standby is no running work: it is in no run's files, so admission never counts it.
- It ends when the service that started it stops or dies (its stdin, a pipe from that
  service, closes), when its environment is removed or falls out of the `count` most
  recently used, when no pod of its environment was launched for `idle_s` (an idle service
  holds no imported interpreter: the next pod starts fresh, and a standby follows it), and
  when the backend closes. One that died is not claimed (its FIFO has no
  reader) and is replaced at the next pass; one that died before it was ready is not
  started again for `FAILED_BACKOFF_S` (e.g. an environment whose harness has no standby).
- An attempt whose environment differs from the standby's (its task's own variables) is
  started fresh; so is one whose plugin changed since the standby imported it (the standby
  answers `stale`: see `simrun_harness.standby`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from cluster.local import launcher
from cluster.local.atomic_files import locked, read_json, write_json
from cluster.local.attempts import ProcessId
from cluster.local.launches import PodSpec
from cluster.local.standby_files import (
    FAILED_FILE,
    LOCK_FILE,
    USED_FILE,
    StandbyFiles,
    files_of,
)
from runs.ports import RunLaunch
from simrun_harness.layout import check_name

FAILED_BACKOFF_S = 300.0
CLOSE_WAIT_S = 5.0
ENDING_LOOK_S = 1.0  # after ending standbys, the loop looks again this soon


def attempt_free(env: Mapping[str, str]) -> dict[str, str]:
    """A pod's environment less its attempt's SIMRUN_* variables, which the harness reads
    only once it runs: what its standby must have been started with."""
    return {k: v for k, v in env.items() if not k.startswith("SIMRUN_")}


def _used_at(directory: Path) -> float | None:
    """When a harness pod of the environment was last launched (its marker's time)."""
    try:
        return (directory / USED_FILE).stat().st_mtime
    except (FileNotFoundError, NotADirectoryError):
        return None


def _send(fifo: Path, attempt: Path) -> bool:
    """Write the attempt's directory to a standby's FIFO; False when nobody reads it."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: its supervisor is gone; ENOENT: its files too
        return False
    try:
        os.write(fd, f"{attempt}\n".encode())
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


@dataclass
class _Owned:
    """A standby supervisor this process started, and the write end of its stdin."""

    process: subprocess.Popen[bytes]
    files: StandbyFiles
    pipe: int | None


class Standbys:
    """The standbys of one local backend's state directory."""

    def __init__(
        self,
        root: Path,
        *,
        count: int,
        bin_of: Callable[[str], Path],
        idle_s: float = float("inf"),
    ) -> None:
        """`root`: `<state>/standby`; `count`: how many environments keep one; `bin_of`: the
        `bin` directory of an environment; `idle_s`: an environment whose pods were last
        launched longer ago keeps none."""
        self.root = root
        self.count = count
        self.bin_of = bin_of
        self.idle_s = idle_s
        self._owned: dict[int, _Owned] = {}
        self._ends_at: float | None = None  # when a pass is next due (time.time): a kept
        # standby's environment going idle, or ended ones to see gone

    # -- any process that launches ------------------------------------------------------

    def used(self, environment: str) -> None:
        """Note that a harness pod of `environment` was launched now."""
        marker = self.root / environment / USED_FILE
        try:
            os.utime(marker)
        except FileNotFoundError:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()

    def claimer(
        self, launch: RunLaunch, spec: PodSpec
    ) -> Callable[[Path, Mapping[str, str]], ProcessId | None] | None:
        """How a pod being launched claims a standby (`claim`); None for a pod that runs no
        harness script (a `command` task)."""
        if spec.kind not in launcher.HARNESS_KINDS:
            return None
        try:
            environment = check_name(launch.environment, what="environment")
        except ValueError:  # no directory name: its pods start fresh
            return None
        self.used(environment)
        return partial(self.claim, environment)

    def claim(self, environment: str, attempt: Path, env: Mapping[str, str]) -> ProcessId | None:
        """Hand the attempt in `attempt` (its pod's environment `env`) to a ready standby of
        `environment`; its supervisor, now the attempt's, or None when there is none."""
        wanted = attempt_free(env)
        directory = self.root / environment
        for ready in sorted(directory.glob("*.ready")):
            files = files_of(ready)
            try:
                data = read_json(ready)
            except ValueError:
                continue
            if files is None or data is None or data.get("env") != wanted:
                continue
            try:
                os.rename(files.ready, files.claimed)
            except FileNotFoundError:  # withdrawn, or claimed by another launcher
                continue
            if _send(Path(data["fifo"]), attempt):
                return ProcessId.from_json(data)
            files.remove(keep_logs=True)  # it died: a fresh process for this attempt
        return None

    # -- the process that runs the loop ---------------------------------------------------

    def keep(self, *, may_start: bool = True) -> None:
        """Start a standby for each of the `count` most recently used environments that has
        none (unless not `may_start`: the node's cores are taken by pods, whose units a new
        standby's imports would slow); end the others' and those of removed environments."""
        self._ends_at = None
        if not self.root.is_dir():
            return
        with locked(self.root / LOCK_FILE):
            self._reap()
            found = ((d, _used_at(d)) for d in self.root.iterdir())
            used = sorted(((d, at) for d, at in found if at is not None), key=lambda u: -u[1])
            now = time.time()
            for rank, (directory, used_at) in enumerate(used):
                python = self.bin_of(directory.name) / "python"
                live = self._live(directory)
                present = python.exists()
                ends_at = used_at + self.idle_s
                if rank >= self.count or not present or now >= ends_at:
                    for files in live:
                        self._end(files)
                    if not present and not live:
                        shutil.rmtree(directory, ignore_errors=True)
                    elif live or not present:  # a pass soon sees them gone (their files too)
                        self._due(now + ENDING_LOOK_S)
                    continue
                self._due(ends_at)
                if may_start and not live and not self._failed_lately(directory):
                    self._start(directory, python)

    def _due(self, at: float) -> None:
        self._ends_at = at if self._ends_at is None else min(self._ends_at, at)

    def due_in_s(self) -> float | None:
        """Seconds until a pass is due: a kept standby's environment goes idle (it then ends),
        or standbys ended are to be seen gone; None when nothing is kept."""
        return None if self._ends_at is None else max(0.0, self._ends_at - time.time())

    def _live(self, directory: Path) -> list[StandbyFiles]:
        """The standbys of an environment that are alive and not claimed; the files of
        dead ones are removed."""
        found = []
        for path in directory.glob("*.json"):
            files = files_of(path)
            if files is None:
                continue
            try:
                data = read_json(path)
            except ValueError:  # not ours to judge: left alone
                continue
            identity = ProcessId.from_json(data)
            if identity is None:  # gone meanwhile: claimed and taken, or ended
                continue
            if not identity.alive():
                files.remove()
            elif not files.claimed.exists():
                found.append(files)
        return found

    def _failed_lately(self, directory: Path) -> bool:
        try:
            failed = (directory / FAILED_FILE).stat().st_mtime
        except FileNotFoundError:
            return False
        return time.time() - failed < FAILED_BACKOFF_S

    def _start(self, directory: Path, python: Path) -> None:
        """Start a standby supervisor, its spec on a pipe that stays open, and make it
        claimable at once: its FIFO is made and opened here, so a launcher's write waits
        in it until the supervisor reads it."""
        env = launcher.base_env(python.parent)
        starting = StandbyFiles(directory, 0)  # named by the supervisor's pid once known
        with contextlib.suppress(FileNotFoundError):
            starting.fifo.unlink()
        os.mkfifo(starting.fifo, 0o600)
        fifo = os.open(starting.fifo, os.O_RDWR | os.O_NONBLOCK)
        read, write = os.pipe()
        try:
            process = self._popen(directory, stdin=read, log=starting.supervisor_log, fifo=fifo)
        except OSError:
            os.close(write)
            raise
        finally:
            os.close(read)
            os.close(fifo)  # the supervisor's is the only reader: none once it is gone
        launcher.keep_reaped(process)
        files = StandbyFiles(directory, process.pid)
        os.rename(starting.supervisor_log, files.supervisor_log)
        os.rename(starting.fifo, files.fifo)
        self._owned[process.pid] = _Owned(process, files, write)
        identity = ProcessId.of(process.pid).to_json()
        write_json(files.identity, identity)
        spec = {"python": str(python), "env": env, "fifo_fd": fifo}
        os.write(write, json.dumps(spec).encode() + b"\n")
        write_json(files.ready, {**identity, "env": env, "fifo": str(files.fifo)})

    def _popen(
        self, directory: Path, *, stdin: int, log: Path, fifo: int
    ) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "cluster.local.standby_supervisor", str(directory)],
                env=launcher.supervisor_env(),
                cwd=directory,
                stdin=stdin,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(fifo,),
            )

    def _end(self, files: StandbyFiles) -> None:
        """Ask a standby to end: it withdraws itself (or runs the attempt that claimed it)."""
        owned = self._owned.get(files.pid)
        if owned is not None and owned.pipe is not None:
            os.close(owned.pipe)
            owned.pipe = None
        identity = ProcessId.from_json(read_json(files.identity))
        if identity is not None and identity.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(identity.pid, signal.SIGTERM)

    def _reap(self) -> None:
        """Forget the standbys this process started that ended; let go of those claimed."""
        for pid, owned in list(self._owned.items()):
            if owned.process.poll() is not None or not owned.files.identity.exists():
                if owned.pipe is not None:
                    os.close(owned.pipe)
                    owned.pipe = None
                if owned.process.returncode is not None:
                    del self._owned[pid]

    def close(self) -> None:
        """End the standbys this process started (not those running an attempt now)."""
        waiting = []
        for owned in self._owned.values():
            if owned.pipe is None:
                continue
            os.close(owned.pipe)
            owned.pipe = None
            if owned.files.identity.exists() and not owned.files.claimed.exists():
                waiting.append(owned.process)
        deadline = time.monotonic() + CLOSE_WAIT_S
        for process in waiting:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
        self._owned = {p: o for p, o in self._owned.items() if o.process.poll() is None}

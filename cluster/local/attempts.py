"""The files of one attempt of a pod, and the processes they name.

    <run>/pods/<pod>/<attempt>/attempt.json     what to run (written before the launch)
    <run>/pods/<pod>/<attempt>/supervisor.json  the supervisor's pid and start time
    <run>/pods/<pod>/<attempt>/child.json       the pod process's pid and start time
    <run>/pods/<pod>/<attempt>/evicted.json     why the backend asked it to stop, and when
    <run>/pods/<pod>/<attempt>/exit.json        how it ended (written once, by whoever is first)
    <run>/pods/<pod>/<attempt>/log              the pod's stdout and stderr
    <run>/pods/<pod>/<attempt>/supervisor.log   the supervisor's own messages

A process is named by its pid *and* its start time, so a pid reused by another process after
a reboot or a long time is never taken for the pod's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cluster.local.atomic_files import create_json, read_json
from simrun_harness import store_reads

if TYPE_CHECKING:
    import psutil

ATTEMPT_FILE = "attempt.json"
SUPERVISOR_FILE = "supervisor.json"
CHILD_FILE = "child.json"
EVICTED_FILE = "evicted.json"
EXIT_FILE = "exit.json"
LOG_FILE = "log"
SUPERVISOR_LOG = "supervisor.log"
LAUNCH_TIMEOUT_S = 60.0  # an attempt without a supervisor file after this was never launched


@dataclass(frozen=True)
class ProcessId:
    """A process by pid and start time (psutil's create_time)."""

    pid: int
    started: float

    @classmethod
    def of(cls, pid: int) -> ProcessId:
        import psutil  # imported when used: a supervisor starts its pod before loading it

        return cls(pid, psutil.Process(pid).create_time())

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "started": self.started}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ProcessId | None:
        return None if data is None else cls(int(data["pid"]), float(data["started"]))

    def process(self) -> psutil.Process | None:
        """The live process, None when it ended (a zombie counts as ended) or the pid is reused."""
        import psutil

        try:
            proc = psutil.Process(self.pid)
            if abs(proc.create_time() - self.started) > 0.01:
                return None
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
        except psutil.Error:
            return None
        return proc

    def alive(self) -> bool:
        return self.process() is not None


@dataclass(frozen=True)
class ExitStatus:
    """How an attempt ended; `exit_code` None when it has none (its supervisor was lost)."""

    exit_code: int | None
    oom_killed: bool
    ended: float
    lost: bool = False
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "oom_killed": self.oom_killed,
            "ended": self.ended,
            "lost": self.lost,
            "message": self.message,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExitStatus:
        code = data.get("exit_code")
        return cls(
            exit_code=None if code is None else int(code),
            oom_killed=bool(data.get("oom_killed", False)),
            ended=float(data["ended"]),
            lost=bool(data.get("lost", False)),
            message=str(data.get("message", "")),
        )


@dataclass(frozen=True)
class Eviction:
    """The backend asked the attempt to stop: why (`preempted by …`, `stopped` …) and when."""

    reason: str
    at: float


@dataclass(frozen=True)
class Attempt:
    """One attempt of a pod as its files say."""

    number: int
    path: Path
    created: float
    cores: float
    memory_gb: float
    supervisor: ProcessId | None
    child: ProcessId | None
    eviction: Eviction | None
    exit: ExitStatus | None

    @property
    def ended(self) -> bool:
        return self.exit is not None

    @property
    def log(self) -> Path:
        return self.path / LOG_FILE


def attempt_path(pod_dir: Path, number: int) -> Path:
    return pod_dir / str(number)


def store_of(pod_dir: Path | str) -> Path:
    """The run store a pod's directory lies in (`<store>/runs/<run>/pods/<pod>`): the root
    below which its files are read, no link followed (the run's code may put one anywhere
    in its run's directory)."""
    parents = Path(os.path.abspath(pod_dir)).parents
    return parents[min(3, len(parents) - 1)]


def attempt_numbers(pod_dir: Path | str) -> list[int]:
    """The numbers of a pod's attempt directories, in order; none when the pod has no
    directory (or a link holds its place: never followed)."""
    try:
        names = store_reads.names(store_of(pod_dir), os.path.abspath(pod_dir))
    except FileNotFoundError:
        return []
    return sorted(int(n) for n in names if n.isascii() and n.isdigit())


def read_attempt(path: Path) -> Attempt | None:
    """The attempt in `path`, None while its attempt file is not written (or a link holds
    the place of the attempt's directory or a file of it: never followed)."""
    root = store_of(path.parent)
    spec = read_json(path / ATTEMPT_FILE, root=root)
    if spec is None:
        return None
    evicted = read_json(path / EVICTED_FILE, root=root)
    ended = read_json(path / EXIT_FILE, root=root)
    status = None if ended is None else ExitStatus.from_json(ended)
    eviction = None if evicted is None else Eviction(evicted["reason"], float(evicted["at"]))
    if eviction is not None and status is not None and eviction.at > status.ended:
        eviction = None  # asked after it had ended: it ended of itself
    return Attempt(
        number=int(spec["attempt"]),
        path=path,
        created=float(spec["created"]),
        cores=float(spec["cores"]),
        memory_gb=float(spec["memory_limit_gb"]),
        supervisor=ProcessId.from_json(read_json(path / SUPERVISOR_FILE, root=root)),
        child=ProcessId.from_json(read_json(path / CHILD_FILE, root=root)),
        eviction=eviction,
        exit=status,
    )


def read_attempts(pod_dir: Path) -> list[Attempt]:
    """Every attempt of a pod, oldest first."""
    found = [read_attempt(attempt_path(pod_dir, n)) for n in attempt_numbers(pod_dir)]
    return [a for a in found if a is not None]


def write_exit(path: Path, status: ExitStatus) -> bool:
    """Record how an attempt ended unless that is recorded already; whether this call did."""
    return create_json(path / EXIT_FILE, status.to_json())


def kill_group(child: ProcessId | None, sig: int) -> None:
    """Send `sig` to the pod process's group (its descendants stay in it), if it still lives."""
    if child is None or not child.alive():
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, sig)


def evict(attempt: Attempt, reason: str, now: float | None = None) -> bool:
    """Ask a running attempt to stop: record why (the supervisor watches for that file) and
    SIGTERM its supervisor, which forwards it and kills the pod after the grace. Whether this
    call asked (not when the attempt was asked before)."""
    if attempt.ended or attempt.eviction is not None or (attempt.path / EXIT_FILE).exists():
        return False
    if not create_json(attempt.path / EVICTED_FILE, {"reason": reason, "at": now or time.time()}):
        return False  # asked already, by another process
    supervisor = attempt.supervisor.process() if attempt.supervisor else None
    if supervisor is None:  # no supervisor to forward it: signal the pod directly
        kill_group(attempt.child, signal.SIGTERM)
    elif attempt.child is not None:  # the supervisor handles SIGTERM once the pod started
        import psutil

        with contextlib.suppress(psutil.Error):
            supervisor.send_signal(signal.SIGTERM)
    # else: a supervisor still starting reads the eviction file instead
    return True


def supervisor_lost(attempt: Attempt, now: float) -> bool:
    """Whether a running attempt has lost its supervisor (it will never write its exit)."""
    if attempt.ended:
        return False
    if attempt.supervisor is None:
        return now - attempt.created > LAUNCH_TIMEOUT_S
    return not attempt.supervisor.alive()


def settle_lost(attempt: Attempt, now: float) -> bool:
    """End an attempt whose supervisor is gone: kill what is left of its pod and record an
    attempt without an exit code. Whether it was lost."""
    if not supervisor_lost(attempt, now):
        return False
    kill_group(attempt.child, signal.SIGKILL)
    root = store_of(attempt.path.parent)
    spec = read_json(attempt.path / ATTEMPT_FILE, root=root) or {}
    remove_partial_units(dict(spec.get("env") or {}))
    message = "its supervisor is gone"
    try:  # the pod's code may have replaced the log: no link followed, its end only read
        log_path = os.path.abspath(attempt.path / SUPERVISOR_LOG)
        with store_reads.open_file(root, log_path) as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(0, size - 4096))
            said = log.read(4096).decode(errors="replace").strip()
    except OSError:
        said = ""
    if said:
        message += f": {said.splitlines()[-1][:300]}"
    return write_exit(attempt.path, ExitStatus(None, False, now, lost=True, message=message))


def remove_partial_units(env: dict[str, str]) -> list[str]:
    """Remove the unit outputs this attempt's pod left half written (it ended, so nothing of
    it writes them any more: cancelled, evicted, killed); the names removed. Others' are
    left alone: their holders may still be writing, and the ledger's sweep handles theirs."""
    from simrun_harness.ledger import partial_unit  # after the pod: its start waits for nothing

    task_dir, worker = env.get("SIMRUN_TASK_DIR"), env.get("SIMRUN_WORKER")
    attempt = env.get("SIMRUN_ATTEMPT")
    if not (task_dir and worker and attempt):
        return []
    token = f"{worker}@{attempt}"
    removed = []
    try:  # the run's code may have made `units` a link: never list or remove through one
        units = os.open(Path(task_dir) / "units", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return []
    try:
        for entry in os.listdir(units):
            parsed = partial_unit(entry)
            if parsed is not None and parsed[1] == token:
                shutil.rmtree(entry, dir_fd=units, ignore_errors=True)
                removed.append(entry)
    finally:
        os.close(units)
    return removed

"""The supervisor of one attempt of a local pod: `python -m cluster.local.supervisor <dir>`.

It is started in a session of its own, so it outlives the service that started it. It runs
the pod's command in a new process group with the attempt's environment, its output going to
the attempt's log, and until the pod ends it:

- measures the anonymous memory (RSS less file-backed pages) of the pod's process tree every
  `poll_s` seconds and kills the whole group when it exceeds the limit: the local evidence of
  a kill for memory (`oom_killed`, exit 137), as the kernel kills a whole container;
- forwards SIGTERM to the group, and kills the group `kill_after_s` seconds later if it has
  not ended (exit 137, not a kill for memory: a pod killed after its grace period). The
  backend's `evicted.json` counts as a SIGTERM too, so an eviction that reaches a supervisor
  before it could handle signals is not lost; an attempt evicted before its pod process
  started ends with 143 without starting it.

When the pod process ends, whatever is left of its tree is killed, the unit outputs it left
half written are removed, the exit status is written once into `exit.json` of the attempt
directory, and the backend's doorbell is rung.

Under `simrun serve` the supervisor is tied to serve (`serve_tie`): when serve ends, however
it ends, the pod is stopped as on SIGTERM, and until then the supervisor and its pod are on
serve's record of processes.

A standby supervisor (`cluster.local.standby_supervisor`) calls `supervise` with the pod
process it started ahead: the attempt is handed to that process instead of a fresh one being
started, and everything above is the same (it is this supervisor's child all the same). An
attempt asked to stop while that process still imports ends 143 without running.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from cluster.local.atomic_files import read_json, write_json
from cluster.local.attempts import (
    ATTEMPT_FILE,
    CHILD_FILE,
    EVICTED_FILE,
    EXIT_FILE,
    LOG_FILE,
    ExitStatus,
    ProcessId,
    remove_partial_units,
    write_exit,
)
from cluster.local.doorbell import ring
from cluster.local.serve_tie import record, serve_gone_fd, serve_identity, unrecord
from simrun_harness.exits import EXIT_POOL_BROKEN, EXIT_TERMINATED

if TYPE_CHECKING:  # psutil is imported once the pod has started: its start waits for nothing
    import psutil

    from cluster.local.standby_supervisor import StandbyChild

GIB = 1024**3


def exit_code_of(returncode: int) -> int:
    """A container's exit code: 128 + the signal for a process killed by one."""
    return 128 - returncode if returncode < 0 else returncode


PAGE = os.sysconf("SC_PAGE_SIZE")


def anonymous_memory(pids: list[int]) -> int:
    """Bytes of anonymous memory of the processes (resident less file-backed and shared
    pages, from `/proc/<pid>/statm`); a process that is gone counts nothing."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as statm:
                fields = statm.read().split()
        except OSError:
            continue
        total += max(0, int(fields[1]) - int(fields[2])) * PAGE
    return total


# The kernel lists each thread's children when built with CONFIG_PROC_CHILDREN (most are).
CHILDREN_LISTED = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def _children(pid: int) -> list[int] | None:
    """The children of a process from `/proc/<pid>/task/*/children`; None if it is gone."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    found: list[int] = []
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as children:
                found.extend(int(c) for c in children.read().split())
        except OSError:  # the thread ended meanwhile
            continue
    return found


def process_tree(root: int) -> list[int]:
    """The pids of `root` and its descendants.

    Walks only the pod's own tree through the kernel's lists of children, so a poll costs a
    few small reads per pod process however many processes the machine runs (psutil's
    `children(recursive=True)`, the fallback, reads every process of the machine).
    """
    if not CHILDREN_LISTED:
        import psutil

        try:
            return [root, *(p.pid for p in psutil.Process(root).children(recursive=True))]
        except psutil.Error:
            return []
    pids: list[int] = []
    stack = [root]
    while stack:
        pid = stack.pop()
        children = _children(pid)
        if children is not None:
            pids.append(pid)
            stack.extend(children)
    return pids


def _exit_fd(pid: int) -> int | None:
    """A descriptor readable once the process `pid` ends (Linux 5.3+), None where there is
    none: the supervisor then notices the end at its next poll."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def kill_all(pgid: int, known: dict[int, psutil.Process]) -> None:
    """SIGKILL the group and every process of the tree seen so far (some may have left it)."""
    import psutil

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for proc in known.values():
        with contextlib.suppress(psutil.Error):
            proc.kill()


class Supervision:
    """The state of one supervised pod process."""

    def __init__(self, directory: Path, standby: StandbyChild | None = None) -> None:
        spec = read_json(directory / ATTEMPT_FILE)
        if spec is None:
            raise SystemExit(f"supervisor: no {ATTEMPT_FILE} in {directory}")
        self.directory = directory
        self.args: list[str] = list(spec["args"])
        self.env: dict[str, str] = dict(spec["env"])
        self.cwd = str(spec["cwd"])
        self.limit_bytes = int(float(spec["memory_limit_gb"]) * GIB)
        self.kill_after_s = float(spec["kill_after_s"])
        self.poll_s = float(spec.get("poll_s", 0.1))
        self.doorbell = Path(spec["doorbell"]) if spec.get("doorbell") else None
        self.term_at: float | None = None
        self.forwarded = False  # SIGTERM sent on to the pod
        self.killed_at: float | None = None
        self.oom_killed = False
        self.peak = 0
        self.known: dict[int, psutil.Process] = {}
        self.standby = standby
        self.adopted: float | None = None  # when the standby took the attempt
        # the supervisor's own environment, inherited from the service that started it (or,
        # for a standby, from the watcher): it names the serve the pod belongs to
        self.env_of_service = dict(os.environ)

    def _remember(self, pids: list[int]) -> None:
        """Keep a handle on every process seen in the tree, to kill it even if it leaves."""
        import psutil

        for pid in pids:
            if pid not in self.known:
                with contextlib.suppress(psutil.Error):
                    self.known[pid] = psutil.Process(pid)

    def on_term(self, signum: int, frame: FrameType | None) -> None:
        if self.term_at is None:
            self.term_at = time.monotonic()

    def asked_to_stop(self) -> bool:
        return self.term_at is not None or (self.directory / EVICTED_FILE).exists()

    def start(self) -> subprocess.Popen[bytes] | None:
        """The pod process: the standby's, if it takes the attempt, else a fresh one; None
        when the attempt was asked to stop while the standby still imported."""
        if self.standby is not None:
            child, why = self.standby.hand(
                args=self.args,
                env=self.env,
                cwd=self.cwd,
                log=self.directory / LOG_FILE,
                stopped=self.asked_to_stop,
                poll_s=self.poll_s,
            )
            if child is not None:
                self.adopted = time.time()
                return child
            if self.asked_to_stop():
                return None
            print(f"supervisor: a fresh process, not the standby: {why}", file=sys.stderr)
        with open(self.directory / LOG_FILE, "ab") as log:
            try:
                return subprocess.Popen(
                    self.args,
                    env=self.env,
                    cwd=self.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                log.write(f"cannot start {self.args[0]!r}: {exc}\n".encode())
                raise

    def watch(self, child: subprocess.Popen[bytes]) -> int:
        """Supervise until the child ends; its return code. The end of the serve this pod
        belongs to (if any) counts as a SIGTERM."""
        ended = _exit_fd(child.pid)
        serve_gone = serve_gone_fd(serve_identity(self.env_of_service))
        try:
            while True:
                returncode = self._poll(child)
                if returncode is not None:
                    return returncode
                # until the next poll, or the pod's end at once (its run, its doorbell)
                waits = [fd for fd in (ended, serve_gone) if fd is not None]
                if waits:
                    readable, _, _ = select.select(waits, [], [], self.poll_s)
                else:
                    readable = []
                    time.sleep(self.poll_s)
                if serve_gone is not None and serve_gone in readable:
                    print("supervisor: simrun serve ended: stopping the pod", file=sys.stderr)
                    self.on_term(signal.SIGTERM, None)
                    os.close(serve_gone)
                    serve_gone = None
        finally:
            for fd in (ended, serve_gone):
                if fd is not None:
                    os.close(fd)

    def _poll(self, child: subprocess.Popen[bytes]) -> int | None:
        """One look at the pod: its return code once it ended, else memory and signals."""
        returncode = child.poll()
        if returncode is not None:
            return returncode
        now = time.monotonic()
        if self.term_at is None and (self.directory / EVICTED_FILE).exists():
            self.term_at = now
        tree = process_tree(child.pid)
        self._remember(tree)
        used = anonymous_memory(tree)
        self.peak = max(self.peak, used)
        if used > self.limit_bytes and self.killed_at is None:
            self.oom_killed = True
            self.killed_at = now
            print(
                f"supervisor: memory {used / GIB:.3f} GiB over the limit "
                f"{self.limit_bytes / GIB:.3f} GiB: killing the pod",
                file=sys.stderr,
                flush=True,
            )
            kill_all(child.pid, self.known)
        if self.term_at is not None and not self.forwarded:
            self.forwarded = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
        if (
            self.term_at is not None
            and self.killed_at is None
            and now - self.term_at > self.kill_after_s
        ):
            self.killed_at = now
            print("supervisor: grace period over: killing the pod", file=sys.stderr)
            kill_all(child.pid, self.known)
        return None

    def status(self, returncode: int) -> ExitStatus:
        code = EXIT_POOL_BROKEN if self.oom_killed else exit_code_of(returncode)
        # the harness kills a unit process itself before the pod reaches its limit: its
        # report counts the kill, the evidence the pod's retry rules need here too
        oom = self.oom_killed or (code == EXIT_POOL_BROKEN and reported_oom_kill(self.env))
        message = "OOMKilled" if oom else ""
        return ExitStatus(code, oom, time.time(), message=message)


REPORT_MAX_BYTES = 1024 * 1024


def reported_oom_kill(env: dict[str, str]) -> bool:
    """Whether the report of this attempt (written by the harness) counts a kill for memory;
    read without following a link the pod's code may have put in its place."""
    import json

    from simrun_harness import store_reads

    task_dir, worker, attempt = (
        env.get(k) for k in ("SIMRUN_TASK_DIR", "SIMRUN_WORKER", "SIMRUN_ATTEMPT")
    )
    if not (task_dir and worker and attempt):
        return False
    try:
        data = json.loads(
            store_reads.read_bytes(
                Path(task_dir), f"reports/{worker}-{attempt}.json", limit=REPORT_MAX_BYTES
            )
        )
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and int(data.get("oom_kills") or 0) > 0


def supervise(
    directory: Path, *, standby: StandbyChild | None = None, terminated: bool = False
) -> int:
    """Run and supervise the attempt in `directory`; the pod's exit code. `standby`: a pod
    process started ahead, to hand the attempt to; `terminated`: SIGTERM came before."""
    if (directory / EXIT_FILE).exists():  # declared lost before it could start
        if standby is not None:
            standby.end()
        return 0
    run = Supervision(directory, standby)
    signal.signal(signal.SIGTERM, run.on_term)
    if terminated:
        run.on_term(signal.SIGTERM, None)
    if run.asked_to_stop():
        if standby is not None:
            standby.end()
        status = ExitStatus(EXIT_TERMINATED, False, time.time(), message="not started")
        write_exit(directory, status)
        return EXIT_TERMINATED
    try:
        child = run.start()
    except OSError:
        write_exit(directory, ExitStatus(127, False, time.time(), message="cannot start"))
        return 127
    if child is None:  # asked to stop while its standby imported: it never ran
        status = ExitStatus(EXIT_TERMINATED, False, time.time(), message="not started")
        write_exit(directory, status)
        if run.doorbell is not None:
            ring(run.doorbell)
        return EXIT_TERMINATED
    started = ProcessId.of(child.pid).to_json()
    if run.adopted is not None:  # started ahead: when it took the attempt
        started["adopted"] = run.adopted
    write_json(directory / CHILD_FILE, started)
    what = f"pod {run.env.get('SIMRUN_WORKER', '?')} of run {run.env.get('SIMRUN_RUN', '?')}"
    recorded = record(supervisor=os.getpid(), pod=child.pid, what=what)
    returncode = run.watch(child)
    kill_all(child.pid, run.known)  # the pod ended: nothing of it may stay behind
    remove_partial_units(run.env)
    status = run.status(returncode)
    write_exit(directory, status)
    unrecord(recorded)
    if run.doorbell is not None:
        ring(run.doorbell)  # the backend's loop passes now, not at its next interval
    return status.exit_code or 0


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m cluster.local.supervisor <attempt directory>")
    supervise(Path(sys.argv[1]))


if __name__ == "__main__":
    main()

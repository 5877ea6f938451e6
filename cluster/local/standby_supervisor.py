"""A standby: `python -m cluster.local.standby_supervisor <dir>`, its spec on stdin.

The local backend's loop starts one per recently used environment (cluster/local/standby.py)
with a pipe as its stdin: the first line is its spec (the environment's Python, the
environment a pod of it gets less the attempt's SIMRUN_* variables, and the descriptor of its
FIFO, which the backend created and opened, so that it can be claimed at once); the pipe then
stays open for as long as that service runs. The supervisor starts the pod process ahead
(`simrun_harness.standby`, which imports the harness and the plugins, then says `ready`) and
waits for one of:

- an attempt directory on its FIFO, written by a launcher that claimed it: it becomes that
  attempt's supervisor (`supervisor.supervise`), handing the attempt to its pod process —
  which stays its child, so the memory watch, the pidfd wait, SIGTERM and the exit status
  are a fresh attempt's. A claim may come while the pod process still imports: the attempt
  waits for the rest of its imports, never for a second process's — unless it is asked to
  stop meanwhile (cancelled, evicted): then it ends 143 at once, never started, and the pod
  process is killed. The pod process dies with this supervisor (its parent-death signal);
- the end of its stdin (the service stopped or died), SIGTERM (the backend ended it: its
  environment was removed or is no longer among the most recently used), or its pod process
  gone: it withdraws (unless a launcher claimed it first: then it takes that attempt all the
  same), kills its pod process and exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cluster.local.attempts import ATTEMPT_FILE, SUPERVISOR_LOG
from cluster.local.standby_files import FAILED_FILE, StandbyFiles
from cluster.local.supervisor import supervise
from simrun_harness.standby import OK, READY, handoff_message

CLAIM_WAIT_S = 30.0  # a claimed standby that is ending waits this long for its attempt
HANDOFF_TIMEOUT_S = 120.0  # for its answer (it may still be importing a heavy plugin)
LOG_TAIL = 2000


def _read_line(fd: int, timeout: float | None = None) -> bytes:
    """A line from `fd` (b"" at its end or after `timeout` seconds)."""
    data = b""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not data.endswith(b"\n"):
        if deadline is not None:
            readable, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not readable:
                return b""
        chunk = os.read(fd, 65536)
        if not chunk:
            return b""
        data += chunk
    return data


class StandbyChild:
    """The pod process started ahead, and the pipes to and from it."""

    def __init__(
        self, process: subprocess.Popen[bytes], to_child: int, from_child: int, log: Path
    ) -> None:
        self.process = process
        self.to_child = to_child
        self.from_child = from_child
        self.log = log  # its output until it takes an attempt (it removes it then)
        self.ready = False  # it has imported what it imports
        self._heard = b""

    @classmethod
    def start(cls, python: str, env: Mapping[str, str], files: StandbyFiles) -> StandbyChild:
        to_read, to_write = os.pipe()
        from_read, from_write = os.pipe()
        args = [python, "-m", "simrun_harness.standby"]
        args += [str(to_read), str(from_write), str(files.log)]
        with open(files.log, "ab") as log:
            process = subprocess.Popen(
                args,
                env=dict(env),
                cwd=files.directory,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(to_read, from_write),
            )
        os.close(to_read)
        os.close(from_write)
        return cls(process, to_write, from_read, files.log)

    def hear(self, timeout: float | None) -> bytes | None:
        """Its next line other than `ready` (noted), b"" when it ended, None when it said
        nothing more (but `ready`) within `timeout` seconds."""
        while True:
            if b"\n" in self._heard:
                line, _, self._heard = self._heard.partition(b"\n")
                if line + b"\n" == READY:
                    self.ready = True
                    continue
                return line + b"\n"
            readable, _, _ = select.select([self.from_child], [], [], timeout)
            if not readable:
                return None
            chunk = os.read(self.from_child, 4096)
            if not chunk:
                return b""
            self._heard += chunk

    def hand(
        self,
        *,
        args: Sequence[str],
        env: Mapping[str, str],
        cwd: str,
        log: Path,
        stopped: Callable[[], bool] = lambda: False,
        poll_s: float = 0.1,
    ) -> tuple[subprocess.Popen[bytes] | None, str]:
        """Give it the attempt (it takes it once it has imported what it imports): the
        process that runs it, or None and why it does not. While it still imports, `stopped`
        is asked every `poll_s` seconds: an attempt asked to stop meanwhile (cancelled,
        evicted) does not wait for the rest of its imports."""
        message = handoff_message(args=args, env=env, cwd=cwd, log=str(log))
        reply: bytes | None = None
        deadline = time.monotonic() + HANDOFF_TIMEOUT_S
        try:
            while message:
                message = message[os.write(self.to_child, message) :]
            while reply is None and not stopped() and time.monotonic() < deadline:
                reply = self.hear(max(0.0, min(poll_s, deadline - time.monotonic())))
            if reply is None:  # it may have taken the attempt just now: then it runs it
                reply = self.hear(0)
        except OSError as exc:
            reply = f"cannot reach it: {exc}".encode()
        self._close_pipes()
        if reply is None:
            answer = "asked to stop first" if stopped() else "no answer in time"
        else:
            answer = reply.decode(errors="replace").strip() or "it ended without an answer"
        if answer == OK:
            return self.process, ""
        self.end()
        return None, answer

    def _close_pipes(self) -> None:
        for fd in (self.to_child, self.from_child):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.to_child = self.from_child = -1

    def end(self) -> None:
        """Kill it (its group), collect its exit, remove its log."""
        self._close_pipes()
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.log.unlink(missing_ok=True)


class Waiting:
    """The standby before it has an attempt."""

    def __init__(self, files: StandbyFiles, spec: dict[str, Any]) -> None:
        self.files = files
        self.python = str(spec["python"])
        self.env: dict[str, str] = dict(spec["env"])
        self.why_end: str | None = None
        self.terminated = False
        self.fifo = int(spec["fifo_fd"])  # opened by the backend, read only here
        self.wake_read, wake_write = os.pipe()
        for fd in (self.wake_read, wake_write):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        self.child = StandbyChild.start(self.python, self.env, files)

    def wait(self) -> Path | None:
        """Wait until it has an attempt (its directory) or must end (None)."""
        while self.why_end is None:
            fds = [0, self.child.from_child, self.fifo, self.wake_read]
            readable, _, _ = select.select(fds, [], [])
            if self.fifo in readable:
                return self._attempt()
            if 0 in readable and not os.read(0, 4096):
                self.why_end = "the service that started it is gone"
            if self.child.from_child in readable:
                self._from_child()
            if self.wake_read in readable:
                self.terminated = True
                self.why_end = "SIGTERM"
        if not self.files.withdraw():  # claimed first: the attempt is ours
            readable, _, _ = select.select([self.fifo], [], [], CLAIM_WAIT_S)
            if readable:
                return self._attempt()
        return None

    def _attempt(self) -> Path | None:
        line = _read_line(self.fifo, HANDOFF_TIMEOUT_S).decode(errors="replace").strip()
        path = Path(line)
        return path if path.is_absolute() and (path / ATTEMPT_FILE).is_file() else None

    def _from_child(self) -> None:
        if self.child.hear(0) is None:  # `ready`
            if self.child.ready:
                self.files.imported.touch()
            return
        self.why_end = "its pod process ended"
        if not self.child.ready:  # it never got ready: say why, so none is started for a while
            try:
                said = self.files.log.read_bytes()[-LOG_TAIL:].decode(errors="replace")
            except OSError:
                said = ""
            (self.files.directory / FAILED_FILE).write_text(f"{self.why_end}:\n{said}")


def adopt(attempt: Path, waiting: Waiting) -> int:
    """Become the attempt's supervisor, its pod the standby's process. (The pod process
    removes its own log once it has copied it into the attempt's.)"""
    signal.set_wakeup_fd(-1)
    with contextlib.suppress(BlockingIOError):
        waiting.terminated |= bool(os.read(waiting.wake_read, 512))  # a SIGTERM just now
    os.close(waiting.wake_read)
    os.close(waiting.fifo)
    waiting.files.remove(keep_logs=True)
    with open(attempt / SUPERVISOR_LOG, "ab") as log:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    waiting.files.supervisor_log.unlink(missing_ok=True)
    return supervise(attempt, standby=waiting.child, terminated=waiting.terminated)


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m cluster.local.standby_supervisor <directory>")
    directory = Path(sys.argv[1])
    spec = json.loads(_read_line(0) or b"null")
    if not isinstance(spec, dict):
        raise SystemExit("standby supervisor: no spec on stdin")
    files = StandbyFiles(directory, os.getpid())
    waiting = Waiting(files, spec)
    import psutil  # noqa: F401 - now, while it waits: a fresh supervisor imports it once its pod runs

    try:
        attempt = waiting.wait()
    except BaseException:  # a bug: said in `failed`, so none is started for a while
        waiting.child.end()
        files.remove()
        (directory / FAILED_FILE).write_text(f"its supervisor failed:\n{traceback.format_exc()}")
        raise
    if attempt is None:
        waiting.child.end()
        files.remove()
        return
    adopt(attempt, waiting)


if __name__ == "__main__":
    main()

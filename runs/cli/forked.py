"""serve's side of the services' parent (`runs/cli/service_parent.py`): start it, ask it for a
service, and hold the service it forked as serve holds one it started itself.

The parent is an optimisation, never a dependency: when it cannot be started, does not answer
in time, or refuses a request, serve starts the service by its command line as before, and
for `RETRY_S` after a failure every service so (a parent that cannot start costs one wait,
not one a service); then it starts the parent again.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from runs.cli.parent_death import dying_with_me

READY_S = 120.0  # the parent's imports: a few seconds, a minute on a machine under load
ANSWER_S = 10.0  # a fork, once it is ready: milliseconds
RETRY_S = 60.0  # after a parent failed, services are started by command line this long
TITLE_ROOM = 512  # characters of command line a forked service may use for its title
POLL_S = 0.01


class ParentUnavailable(Exception):
    """The parent could not fork the service; the message says why."""


class ForkedProcess:
    """A service forked by the parent and adopted by serve, with the part of `Popen`'s
    interface serve uses: its pid, `poll`, `wait`, `terminate` and `kill`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.args = f"forked service {pid}"

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its code is lost
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code once it ended (woken by its pidfd where Linux has one, else looking
        every POLL_S); TimeoutExpired after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if (code := self.poll()) is not None:
            return code
        try:
            ended: int | None = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            ended = None
        try:
            while (code := self.poll()) is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
                if ended is not None:
                    select.select([ended], [], [], left)
                else:
                    time.sleep(POLL_S if left is None else min(POLL_S, left))
        finally:
            if ended is not None:
                os.close(ended)
        return code

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


@dataclass
class ServiceParent:
    """The parent process of the services of one serve, started on first use."""

    env: dict[str, str]
    cwd: Path
    log: int | None = None  # where the parent's own output goes (serve's stderr if None)
    proc: subprocess.Popen[bytes] | None = None
    channel: socket.socket | None = None
    failed_at: float | None = None  # monotonic time of the last failure

    def fork(self, *, kind: str, argv: list[str], out: int) -> ForkedProcess:
        """The service `kind` (web, worker, beat, watcher) running `argv`'s entry point with
        its output on `out`, forked by the parent; ParentUnavailable if it cannot be."""
        if self.failed_at is not None and time.monotonic() - self.failed_at < RETRY_S:
            raise ParentUnavailable(f"the services' parent failed less than {RETRY_S:.0f}s ago")
        try:
            channel = self._channel()
        except ParentUnavailable:
            self.failed_at = time.monotonic()
            raise
        request = json.dumps({"kind": kind, "argv": argv, "cwd": str(self.cwd)}).encode()
        try:
            socket.send_fds(channel, [request], [out])
            answer = self._answer(channel, ANSWER_S)
        except (OSError, ParentUnavailable) as exc:
            self.close()
            self.failed_at = time.monotonic()
            raise ParentUnavailable(f"the services' parent did not answer: {exc}") from None
        pid = answer.get("pid")
        if not isinstance(pid, int):
            raise ParentUnavailable(f"the services' parent refused: {answer.get('error')}")
        return ForkedProcess(pid)

    def _channel(self) -> socket.socket:
        if self.channel is not None and self.proc is not None and self.proc.poll() is None:
            return self.channel
        self.close()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        command = [
            sys.executable,
            "-m",
            "runs.cli.service_parent",
            str(theirs.fileno()),
            str(os.getpid()),
            "." * TITLE_ROOM,
        ]
        try:
            self.proc = subprocess.Popen(
                dying_with_me(command),
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=subprocess.STDOUT if self.log is not None else None,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        except OSError as exc:
            mine.close()
            raise ParentUnavailable(f"the services' parent could not start: {exc}") from None
        finally:
            theirs.close()
        self.channel = mine
        try:
            ready = self._answer(mine, READY_S)
        except ParentUnavailable as exc:
            self.close()
            raise ParentUnavailable(f"the services' parent did not become ready: {exc}") from None
        if not ready.get("ready"):
            self.close()
            raise ParentUnavailable(f"the services' parent is not ready: {ready.get('error')}")
        return mine

    def _answer(self, channel: socket.socket, within_s: float) -> dict[str, object]:
        channel.settimeout(within_s)
        try:
            data = channel.recv(64 * 1024)
        except TimeoutError:
            raise ParentUnavailable(f"no answer within {within_s:.0f}s") from None
        if not data:
            raise ParentUnavailable("it exited")
        try:
            answer = json.loads(data)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise ParentUnavailable(f"an answer of the wrong shape: {data[:80]!r}")
        return answer

    def close(self) -> None:
        """End the parent (closing its socket ends it; a stuck one is killed) and reap it.
        The services it forked are serve's and go on."""
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

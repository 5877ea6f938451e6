"""Plugin hosts: processes in a model's environment that answer for its task types.

No service process (web, Celery worker, watcher) imports a task type's module: whatever the
service needs of a type — what it is, its settings checked, its units — it asks a plugin host
(`simrun_harness.plugin_host`), started with the environment's own Python. A host is kept
warm for the next question while the plugins it loaded are as they were (the caller keys
hosts by the plugins' digests, `runs.task_types`), so an edit on disk is answered by a new
host at once, without a restart of the service.

What a host may cost the service is bounded: each question has a deadline
(`SIMRUN_PLUGIN_HOST_TIMEOUT_S`: the host is killed after it), the host's memory a limit
(`SIMRUN_PLUGIN_HOST_MEMORY_MB`, its data segment), a process at most
`SIMRUN_PLUGIN_HOSTS` hosts at once (a caller waits for one within the deadline), and a host
idle for `SIMRUN_PLUGIN_HOST_IDLE_S` is ended. A host crashing, hanging or running out of
memory is a `HostFailed` whose message says which; the caller names the type and plugin.
A host gets none of the service's environment variables (its database, its secrets): only
the locale, the path and a home, and its own temporary working directory.

No Django here: `simrun validate` asks hosts too.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOG_TAIL_LINES = 20
_PASSED = ("PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR")
_ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class HostLimits:
    """What one host may take: seconds per question, memory, hosts per process, idle time."""

    timeout_s: float = 30.0
    memory_mb: int = 2048
    hosts: int = 4
    idle_s: float = 120.0


def limits() -> HostLimits:
    """The limits of this service's settings; where Django is not set up (`simrun validate`),
    the same variables read from the environment, else the defaults."""
    conf = sys.modules.get("django.conf")  # never import Django only to read four numbers
    if conf is not None and conf.settings.configured:
        s = conf.settings
        return HostLimits(
            timeout_s=s.SIMRUN_PLUGIN_HOST_TIMEOUT_S,
            memory_mb=s.SIMRUN_PLUGIN_HOST_MEMORY_MB,
            hosts=s.SIMRUN_PLUGIN_HOSTS,
            idle_s=s.SIMRUN_PLUGIN_HOST_IDLE_S,
        )
    defaults = HostLimits()

    def read(name: str, default: float) -> float:
        try:
            value = float(os.environ.get(name, ""))
        except ValueError:
            return default
        return value if value > 0 else default

    return HostLimits(
        timeout_s=read("SIMRUN_PLUGIN_HOST_TIMEOUT_S", defaults.timeout_s),
        memory_mb=int(read("SIMRUN_PLUGIN_HOST_MEMORY_MB", defaults.memory_mb)),
        hosts=int(read("SIMRUN_PLUGIN_HOSTS", defaults.hosts)),
        idle_s=read("SIMRUN_PLUGIN_HOST_IDLE_S", defaults.idle_s),
    )


class HostFailed(Exception):
    """The host did not answer: it crashed, hung past its deadline or ran out of memory.
    The message says which (with the last lines of its log)."""


@dataclass(frozen=True)
class HostSpec:
    """Which host answers: the environment's Python, the import path it adds in front
    (`PYTHONPATH`) and the key of the plugins it may load (their digests): a host is reused
    only for the same key."""

    python: str
    path: tuple[str, ...] = ()
    key: str = ""


class Host:
    """One host process."""

    def __init__(self, spec: HostSpec, memory_mb: int) -> None:
        self.spec = spec
        self.workdir = Path(tempfile.mkdtemp(prefix="simrun-plugin-host-"))
        self.log = self.workdir / "host.log"
        passed = {name: os.environ[name] for name in _PASSED if name in os.environ}
        env = {"LANG": "C.UTF-8", **passed, **dict.fromkeys(_ONE_THREAD, "1")}
        env["PYTHONPATH"] = os.pathsep.join(spec.path)
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [spec.python, "-m", "simrun_harness.plugin_host", "--memory-mb", str(memory_mb)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self.workdir,
                env=env,
                start_new_session=True,
            )
        self.last_used = time.monotonic()

    def ask(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """The host's answer to `request`; HostFailed when none came in time or it ended."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._ended() from None
        fd = self.proc.stdout.fileno()
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.close()
                raise HostFailed(f"it did not answer within {timeout_s:g} s and was stopped")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise self._ended()
            line += chunk
        self.last_used = time.monotonic()
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _ended(self) -> HostFailed:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        tail = self.log_tail()
        self.close()
        if code is not None and code < 0:
            how = f"was killed by signal {signal.Signals(-code).name}"
        else:
            how = f"ended (exit {code})"
        memory = " (out of memory)" if "MemoryError" in tail else ""
        return HostFailed(f"it {how}{memory}" + (f":\n{tail}" if tail else ""))

    def log_tail(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-LOG_TAIL_LINES:])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        """End the host (its whole session: what its plugin started too) and its directory."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


class HostPool:
    """The hosts of this process: idle ones kept by spec, at most `limits().hosts` at once."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._idle: list[Host] = []
        self._busy = 0

    @contextlib.contextmanager
    def host(self, spec: HostSpec) -> Iterator[Host]:
        """A host of `spec`: an idle one, else a new one (waiting for a free place within the
        deadline). A host that failed is not kept."""
        bounds = limits()
        found = self._take(spec, bounds)
        try:
            yield found
        except BaseException:
            found.close()
            with self._lock:
                self._busy -= 1
                self._lock.notify()
            raise
        with self._lock:
            self._busy -= 1
            if found.alive():
                self._idle.append(found)
            self._lock.notify()

    def _take(self, spec: HostSpec, bounds: HostLimits) -> Host:
        deadline = time.monotonic() + bounds.timeout_s
        with self._lock:
            self._reap(bounds)
            while True:
                for i, host in enumerate(self._idle):
                    if host.spec == spec and host.alive():
                        self._busy += 1
                        return self._idle.pop(i)
                if self._idle and self._busy + len(self._idle) >= bounds.hosts:
                    self._idle.pop(0).close()  # an idle one of other plugins makes room
                if self._busy + len(self._idle) < bounds.hosts:
                    self._busy += 1
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise HostFailed(
                        f"all {bounds.hosts} plugin hosts of this process stayed busy for "
                        f"{bounds.timeout_s:g} s (SIMRUN_PLUGIN_HOSTS)"
                    )
                self._lock.wait(left)
        try:
            return Host(spec, bounds.memory_mb)
        except BaseException:
            with self._lock:
                self._busy -= 1
                self._lock.notify()
            raise

    def _reap(self, bounds: HostLimits) -> None:
        now = time.monotonic()
        keep = []
        for host in self._idle:
            if now - host.last_used > bounds.idle_s or not host.alive():
                host.close()
            else:
                keep.append(host)
        self._idle = keep

    def close_all(self) -> None:
        with self._lock:
            for host in self._idle:
                host.close()
            self._idle = []

    def idle_specs(self) -> Sequence[HostSpec]:
        with self._lock:
            return [h.spec for h in self._idle]


POOL = HostPool()
atexit.register(POOL.close_all)


def ask(spec: HostSpec, request: dict[str, Any]) -> dict[str, Any]:
    """Ask a host of `spec`; HostFailed when it did not answer."""
    with POOL.host(spec) as host:
        return host.ask(request, limits().timeout_s)

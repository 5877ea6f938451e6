"""`simrun serve`'s supervisor: keeps web, worker, beat and watcher up and making progress.

A service that exits is started again after the delay of its `CrashHistory` (the exit, its
code and the log to read are said on stderr); so is one that shows no sign of progress for
the liveness deadline (`runs/cli/liveness.py`: its whole process group is killed first, and
the line says how long it was silent). One that crashes more often than the policy allows
stops everything with `GaveUp`. Pods are in sessions of their own and go on running through a
service's restart, so runs in flight continue under the new service.

Each service dies with serve, however serve dies (a parent-death signal,
`runs/cli/parent_death.py`), and writes into a pipe that serve copies to its log, rotated by
size (`runs/cli/service_logs.py`).

`serve` makes itself the child subreaper of everything below it: a pod's supervisor whose
service died is re-parented to serve rather than to init, so serve reaps it when it exits
(no zombies) and finds it when it stops (no orphans): after the services, every pod
supervisor left gets SIGTERM, which it forwards to its pod; what is left after the pod
grace is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from runs.cli.forked import ForkedProcess, ParentUnavailable, ServiceParent
from runs.cli.liveness import Prober, Sign, overdue
from runs.cli.parent_death import dying_with_me
from runs.cli.restarts import CrashHistory, RestartPolicy
from runs.cli.service_logs import LogPump, RotatingLog
from runs.cli.service_state import ServeRecord, ServiceRecord, remove_state, write_state
from runs.disk_space import DiskFull, disk_full

PR_SET_CHILD_SUBREAPER = 36
ROOM_LOOK_S = 2.0  # how often a service that exited on a full disk looks for room again


class GaveUp(Exception):
    """A service crashed too often; the message says which, how and where its log is."""


def become_subreaper() -> None:
    """Orphans below this process become its children (Linux); elsewhere nothing changes."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


@dataclass
class Service:
    """One supervised process and its history."""

    name: str
    command: list[str]
    log: Path
    history: CrashHistory
    proc: subprocess.Popen[bytes] | ForkedProcess | None = None
    started_mono: float = 0.0
    up_since: float | None = None
    restarts: int = 0
    restart_at: float | None = None  # monotonic time of the next start while backing off
    started: float | None = None  # its process's create_time
    cause: str = ""  # why it was last restarted
    cause_at: float | None = None
    output: RotatingLog | None = None
    waits_for_room: bool = False  # it exited while a disk was full: started once there is room

    def record(self, sign: Sign | None) -> ServiceRecord:
        running = self.proc is not None and self.proc.poll() is None
        state = "running" if running else "restarting" if self.restart_at else "stopped"
        pid = self.proc.pid if running and self.proc is not None else None
        mine = sign if sign is not None and sign.at >= (self.up_since or 0) else None
        return ServiceRecord(
            self.name,
            pid,
            self.up_since,
            self.restarts,
            str(self.log),
            state,
            started=self.started if running else None,
            sign_at=mine.at if mine else None,
            sign=mine.what if mine else "",
            cause=self.cause,
            cause_at=self.cause_at,
        )


@dataclass
class Supervisor:
    """Starts, watches, restarts and stops the services of one data directory."""

    commands: dict[str, list[str]]
    env: dict[str, str]
    cwd: Path
    data_dir: Path
    url: str = ""
    store: str = ""
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    say: Callable[[str], None] = lambda line: print(f"simrun: {line}", file=sys.stderr, flush=True)
    services: dict[str, Service] = field(default_factory=dict)
    prober: Prober | None = None  # signs of life; None: a service is judged by its exit only
    log_max_bytes: int = 10 * 1024 * 1024
    log_backups: int = 3
    parent: ServiceParent | None = None  # forks the services; None: each is started by exec

    def __post_init__(self) -> None:
        self.pump = LogPump()
        self._saved_round = -1

    def start(self) -> None:
        logs = self.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for name, command in self.commands.items():
            service = Service(name, command, logs / f"{name}.log", CrashHistory(self.policy))
            service.output = RotatingLog(
                service.log, max_bytes=self.log_max_bytes, backups=self.log_backups
            )
            self.services[name] = service
            self._spawn(service)
        self.save()

    def _spawn(self, service: Service) -> None:
        """Start the service in a session of its own, dying with serve, its output piped
        into its log. Called from serve's main thread only (the parent-death signal is tied
        to the thread that starts the process)."""
        read, write = os.pipe()
        try:
            service.proc = self._forked(service, write) or subprocess.Popen(
                dying_with_me(service.command),
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=write,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
        assert service.output is not None
        self.pump.add(read, service.output)
        service.started_mono = time.monotonic()
        service.up_since = time.time()
        service.restart_at = None
        with contextlib.suppress(psutil.Error):
            service.started = psutil.Process(service.proc.pid).create_time()
        if self.prober is not None:
            self.prober.forget(service.name)

    def _forked(self, service: Service, out: int) -> ForkedProcess | None:
        """The service forked by the services' parent, or None (no parent, or it failed:
        said once a failure, and the service is started by its command line instead)."""
        if self.parent is None:
            return None
        try:
            return self.parent.fork(kind=service.name, argv=service.command, out=out)
        except ParentUnavailable as exc:
            self.say(f"{exc}; starting the {service.name} process by its command line")
            return None

    def check(self) -> None:
        """Reap what ended, restart what is due, note what exited or shows no progress;
        GaveUp when a service crashed too often."""
        self.reap()
        now = time.monotonic()
        changed = False
        for service in self.services.values():
            if service.restart_at is not None and now >= service.restart_at:
                if service.waits_for_room and self._full_disk() is not None:
                    service.restart_at = now + ROOM_LOOK_S
                    continue
                service.waits_for_room = False
                self._spawn(service)
                service.restarts += 1
                changed = True
            elif service.proc is not None and service.restart_at is None:
                code = service.proc.poll()
                if code is not None:
                    self._exited(service, code, now)
                    changed = True
                elif self._silent(service, now):
                    changed = True
        if changed or (self.prober is not None and self.prober.rounds != self._saved_round):
            self.save()

    def _exited(self, service: Service, code: int, now: float) -> None:
        assert service.proc is not None
        with contextlib.suppress(ProcessLookupError):  # what it started in its group
            os.killpg(service.proc.pid, signal.SIGKILL)
        full = self._full_disk()
        if full is not None:
            self._restart_with_room(service, now, code, full)
            return
        self._restart_later(
            service,
            now,
            cause=f"exited with code {code}",
            said=f"exited with code {code}; see {service.log}",
        )

    def _full_disk(self) -> DiskFull | None:
        prober = self.prober
        return None if prober is None else disk_full(prober.disks, min_free=prober.min_free)

    def _restart_with_room(self, service: Service, now: float, code: int, full: DiskFull) -> None:
        """A service that exited while a disk is full (it could not write: beat's schedule,
        a database) is started again once there is room, and its exit is not counted as a
        crash: restarting cannot fix a full disk, and serve must not give up over one."""
        service.waits_for_room = True
        service.restart_at = now + ROOM_LOOK_S
        service.cause, service.cause_at = f"exited with code {code} on a full disk", time.time()
        self.say(
            f"the {service.name} process exited with code {code} while {full.message()}; "
            f"starting it again once there is room; see {service.log}"
        )

    def _silent(self, service: Service, now: float) -> bool:
        """Kill and restart a service that showed no sign of life within the deadline (not
        while a disk is full: nothing can progress then, and a restart frees nothing)."""
        prober = self.prober
        if prober is None or prober.disk is not None or service.up_since is None:
            return False
        wall = time.time()
        sign = prober.sign(service.name)
        # a service silent while the disk was full is given the deadline again from then
        since = max(service.up_since, prober.full_at)
        silent = overdue(since=since, sign=sign, now=wall, deadline_s=prober.deadline_s)
        if silent is None:
            return False
        assert service.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(service.proc.pid, signal.SIGKILL)
        service.proc.wait()
        last = (
            f"its last: {sign.what} {wall - sign.at:.0f}s ago"
            if sign is not None and sign.at >= service.up_since
            else "none since it started"
        )
        self._restart_later(
            service,
            now,
            cause=f"showed no sign of life for {silent:.0f}s",
            said=f"showed no sign of life for {silent:.0f}s ({last}); killed it",
        )
        return True

    def _restart_later(self, service: Service, now: float, *, cause: str, said: str) -> None:
        delay = service.history.crashed(at=now, up_for=now - service.started_mono)
        if delay is None:
            raise GaveUp(
                f"the {service.name} process {cause}, "
                f"{len(service.history.crashes)} times within {self.policy.window_s:.0f}s: "
                f"not restarting it again; stopping everything; see {service.log}"
            )
        service.restart_at = now + delay
        service.cause, service.cause_at = cause, time.time()
        self.say(
            f"the {service.name} process {said}; "
            f"restarting it in {delay:g}s (restart {service.restarts + 1})"
        )

    def save(self) -> None:
        """Rewrite services.json (kept as it was when the disk is full: `status` reads the
        disk's state itself)."""
        prober = self.prober
        if prober is not None:
            self._saved_round = prober.rounds
        record = ServeRecord(
            pid=os.getpid(),
            started=psutil.Process().create_time(),
            url=self.url,
            store=self.store,
            services=[
                s.record(prober.sign(s.name) if prober is not None else None)
                for s in self.services.values()
            ],
        )
        with contextlib.suppress(OSError):
            write_state(self.data_dir, record)

    def _service_pids(self) -> set[int]:
        return {s.proc.pid for s in self.services.values() if s.proc is not None}

    def reap(self) -> None:
        """Collect the exit of every child that ended: adopted processes (pod supervisors
        whose service died) here, a service through its Popen (which keeps its exit code for
        `check`). Asks the kernel which child ended (`waitid` without reaping), a few system
        calls, rather than listing every process of the machine twice a second."""
        services = {s.proc.pid: s.proc for s in self.services.values() if s.proc is not None}
        while True:
            try:
                ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # no child at all
                return
            if ended is None:
                return
            proc = services.pop(ended.si_pid, None)
            if proc is not None:
                proc.poll()
            else:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(ended.si_pid, os.WNOHANG)

    def next_due_s(self, *, at_most: float) -> float:
        """Seconds until something is due (a service's restart), at most `at_most`."""
        now = time.monotonic()
        due = [s.restart_at - now for s in self.services.values() if s.restart_at is not None]
        return max(0.0, min([at_most, *due]))

    def stop(self, *, grace_s: float, pods_grace_s: float) -> None:
        """Stop the services (SIGTERM, then SIGKILL of their groups after `grace_s`), then the
        pods' supervisors (SIGTERM, forwarded to their pods; SIGKILL after `pods_grace_s`)."""
        running = [
            s for s in self.services.values() if s.proc is not None and s.proc.poll() is None
        ]
        for service in self.services.values():
            service.restart_at = None
        for service in running:
            assert service.proc is not None
            service.proc.terminate()
        deadline = time.monotonic() + grace_s
        for service in running:  # one that exited earlier had its group killed then
            assert service.proc is not None
            try:
                service.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say(f"the {service.name} process did not stop within {grace_s:.0f}s: killed")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(service.proc.pid, signal.SIGKILL)
            service.proc.wait()
        if self.parent is not None:
            self.parent.close()
        self._stop_adopted(pods_grace_s)
        self.pump.stop()
        for service in self.services.values():
            if service.output is not None:
                service.output.close()
        remove_state(self.data_dir, pid=os.getpid())

    def _stop_adopted(self, grace_s: float) -> None:
        """SIGTERM to every process left below serve (the pods' supervisors, adopted when
        their services stopped), SIGKILL to what remains after the grace; all reaped."""
        me = psutil.Process()
        for child in me.children():
            with contextlib.suppress(psutil.Error):
                child.terminate()
        deadline = time.monotonic() + grace_s
        while me.children() and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.2)
        for _ in range(50):  # a killed supervisor's pods are adopted in turn: until none
            left = me.children(recursive=True)
            if not left:
                return
            for process in left:
                with contextlib.suppress(psutil.Error):
                    process.kill()
            self.reap()
            time.sleep(0.1)

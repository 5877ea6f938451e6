"""`simrun serve` in the foreground (supervised), and in the background for `simrun demo`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from runs.cli.base import CommandError
from runs.cli.forked import ServiceParent
from runs.cli.leftovers import end_leftovers, records_dir
from runs.cli.liveness import Prober, stamp_dir
from runs.cli.restarts import RestartPolicy
from runs.cli.service_state import ServeRecord, read_state
from runs.cli.supervision import GaveUp, Supervisor, become_subreaper

SERVICE_STOP_GRACE_S = 20.0  # a service's time to end after SIGTERM before its group is killed
STARTUP_TIMEOUT_S = 120.0
CHECK_EVERY_S = 5.0  # serve's loop looks at least this often (a child's end wakes it at once)
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Watchfulness:
    """How serve judges and logs its services: the liveness deadline, the disks it watches
    and the free space it needs on them, and the size and count of its log files."""

    deadline_s: float = 120.0
    disks: tuple[Path, ...] = ()
    min_free: int = 0
    log_max_bytes: int = 10 * 1024 * 1024
    log_backups: int = 3
    fork: bool = False  # the services forked by one parent that imported what they share


def serve_supervised(
    *,
    data_dir: Path,
    port: int,
    commands: Callable[[int], dict[str, list[str]]],
    pods_grace_s: float,
    policy: RestartPolicy,
    store: Path | None = None,
    watch: Watchfulness | None = None,
    before_start: Callable[[], None] | None = None,
    on_serving: Callable[[str], None] | None = None,
) -> int:
    """End what an earlier serve left, start the services, keep them up (and making
    progress) until SIGTERM/SIGINT, then stop them and their pods (`_announce`)."""
    take_over(data_dir)
    if before_start is not None:
        before_start()
    watch = watch or Watchfulness()
    stopping, woken = _stop_and_wake_on_signals()
    become_subreaper()
    url = f"http://127.0.0.1:{port}/"
    prober, supervisor = _supervision(data_dir, url, commands(port), policy, store, watch)
    try:
        supervisor.start()
        prober.start()
        if _wait_for_web(url, supervisor, stopping):
            _announce(url, on_serving)
        while not stopping.is_set():
            # woken by a child's end (SIGCHLD) or a stop at once, else when a restart is
            # due or the liveness judgement's next look: idle, serve wakes every few seconds
            woken.wait(supervisor.next_due_s(at_most=CHECK_EVERY_S))
            woken.clear()
            supervisor.check()
        return 0
    except GaveUp as exc:
        raise CommandError(str(exc)) from None
    finally:
        prober.stop()
        supervisor.stop(grace_s=SERVICE_STOP_GRACE_S, pods_grace_s=pods_grace_s)


def _stop_and_wake_on_signals() -> tuple[threading.Event, threading.Event]:
    """Events set by signals: SIGTERM/SIGINT ask serve to stop (and wake it), a child's end
    (SIGCHLD) only wakes it to look at its services at once."""
    stopping, woken = threading.Event(), threading.Event()

    def stop(*_: object) -> None:
        stopping.set()
        woken.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    signal.signal(signal.SIGCHLD, lambda *_: woken.set())
    return stopping, woken


def _announce(url: str, on_serving: Callable[[str], None] | None) -> None:
    """Say where serve serves, once its web process answers (and what `on_serving` adds)."""
    print(f"simrun is serving on {url} (Ctrl-C stops it)", flush=True)
    print("`simrun status` shows its services, `simrun stop` stops it", flush=True)
    if on_serving is not None:
        on_serving(url)


def _supervision(
    data_dir: Path,
    url: str,
    commands: dict[str, list[str]],
    policy: RestartPolicy,
    store: Path | None,
    watch: Watchfulness,
) -> tuple[Prober, Supervisor]:
    """The prober of the services' signs of life, and the supervisor that judges by them."""
    prober = Prober(
        data_dir=data_dir,
        url=url,
        deadline_s=watch.deadline_s,
        disks=list(watch.disks),
        min_free=watch.min_free,
        signs={},
    )
    env = services_env(data_dir)
    supervisor = Supervisor(
        commands=commands,
        env=env,
        cwd=ROOT,
        parent=ServiceParent(env=env, cwd=ROOT) if watch.fork else None,
        data_dir=data_dir,
        url=url,
        store=str(store) if store is not None else "",
        policy=policy,
        prober=prober,
        log_max_bytes=watch.log_max_bytes,
        log_backups=watch.log_backups,
    )
    return prober, supervisor


def take_over(data_dir: Path) -> None:
    """Refuse a data directory another serve serves; end what a serve that died left."""
    earlier = read_state(data_dir)
    if earlier is not None and earlier.alive() and earlier.pid != os.getpid():
        raise CommandError(
            f"simrun is already serving this data directory ({data_dir}) at {earlier.url} "
            f"(pid {earlier.pid}); `simrun stop` stops it"
        )
    ended = end_leftovers(data_dir, running=None)
    if ended is not None:
        print(ended, flush=True)


def services_env(data_dir: Path) -> dict[str, str]:
    """The environment of serve's services: serve's, and what ties them to this serve."""
    me = psutil.Process()
    return {
        **os.environ,
        "SIMRUN_DATA_DIR": str(data_dir),
        "PYTHONUNBUFFERED": "1",
        # their pods end with this serve and are on its record (cluster/local/serve_tie.py)
        "SIMRUN_SERVE": f"{me.pid}:{me.create_time()!r}",
        "SIMRUN_PROCESS_RECORDS": str(records_dir(data_dir)),
        "SIMRUN_LIVENESS_DIR": str(stamp_dir(data_dir)),
        # Celery runs Django's system checks as the worker and beat start, which imports
        # every view, the API and what they use (~35 MB of each process that serves no page);
        # they are a deployment's concern (`manage.py check --deploy`), not each start's
        "CELERY_SKIP_CHECKS": "1",
        # a service's title (setproctitle: Celery's own, a forked service's command line)
        # is written over its command line only, never over its environment, which is how
        # this serve's processes are found (`simrun stop`, leftovers, the tests)
        "SPT_NOENV": "1",
    }


def _wait_for_web(url: str, supervisor: Supervisor, stopping: threading.Event) -> bool:
    """True once the web process answers; False if asked to stop first."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not stopping.is_set():
        supervisor.check()
        try:
            with urllib.request.urlopen(f"{url}healthz", timeout=2) as reply:
                if reply.status == 200:
                    return True
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise CommandError(f"the web process did not answer at {url} within 120s")
        stopping.wait(0.2)
    return False


@dataclass
class Background:
    """A `simrun serve` started by another command (the demo), logging to logs/serve.log."""

    proc: subprocess.Popen[bytes]
    data_dir: Path
    log: Path

    @classmethod
    def start(cls, *, data_dir: Path, port: int, cwd: Path) -> Background:
        log = data_dir / "logs" / "serve.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "SIMRUN_DATA_DIR": str(data_dir)}
        command = [sys.executable, "-m", "runs.cli.main", "serve", "--port", str(port)]
        with log.open("ab") as out:
            proc = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C of the demo reaches serve through stop()
            )
        return cls(proc, data_dir, log)

    def check(self) -> None:
        """CommandError if serve has exited (it gave up on a service, or was stopped)."""
        if self.proc.poll() is not None:
            raise CommandError(
                f"simrun serve exited with code {self.proc.returncode}; see {self.log}"
            )

    def wait_serving(self) -> str:
        """The URL once serve's web process answers."""
        deadline = time.monotonic() + STARTUP_TIMEOUT_S + 30
        while time.monotonic() < deadline:
            self.check()
            record = read_state(self.data_dir)
            if record is not None and record.pid == self.proc.pid and record.url:
                try:
                    with urllib.request.urlopen(f"{record.url}healthz", timeout=2) as reply:
                        if reply.status == 200:
                            return record.url
                except OSError:
                    pass
            time.sleep(0.2)
        raise CommandError(f"simrun serve did not start serving; see {self.log}")

    def stop(self) -> None:
        """SIGTERM, and wait for serve to stop its services and pods."""
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait()


@dataclass
class Joined:
    """A `simrun serve` already serving the data directory, which the demo runs on and leaves
    running (it is not the demo's to stop)."""

    record: ServeRecord

    @classmethod
    def find(cls, data_dir: Path) -> Joined | None:
        """The serve running here, if one is (a state file of a dead one does not count)."""
        record = read_state(data_dir)
        return cls(record) if record is not None and record.alive() else None

    def check(self) -> None:
        """CommandError if that serve has stopped (stopped from another terminal, or gave up)."""
        if not self.record.alive():
            raise CommandError(
                f"the simrun serve the demo ran on (pid {self.record.pid}) has stopped"
            )

    def wait_serving(self) -> str:
        return self.record.url

    def stop(self) -> None:
        """Nothing: it was running before the demo and goes on."""

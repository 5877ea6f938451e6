"""Is each service of `simrun serve` making progress? Signs of life, and when one is overdue.

A process that exists may still do nothing (stopped, deadlocked, blocked on a lock a dead
process held). So serve judges a service by a recent sign of work, as systemd's `WatchdogSec`
or a Kubernetes liveness probe would, and restarts one that showed none for
`SIMRUN_LIVENESS_S`:

- web: it answered `GET /healthz`;
- worker: its consumer answered Celery's `ping` (a control message, handled by the loop that
  also takes the tasks; the embedded default's thread pool has no process of its own that a
  kill could leave holding a lock);
- beat: its scheduler ticked (it touches `liveness/beat` at each tick);
- watcher: it ended a reconcile pass (it touches `liveness/watcher`).

`Prober` asks web and the worker and reads the stamps in a thread of its own every quarter of
the deadline, so serve's loop never waits on a probe. While the disk is full no service is
judged: none can make progress, and a restart would not free a byte.
"""

from __future__ import annotations

import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runs.disk_space import DiskFull, disk_full

STAMPS = "liveness"  # under the data directory: one file per service that stamps


@dataclass(frozen=True)
class Sign:
    """A sign of life: when, and what it was."""

    at: float  # epoch seconds
    what: str  # "answered /healthz", "answered a ping", "ticked", "reconciled"


STARTUP_S = 60.0  # a service's first sign of life may take this long (a loaded machine)


def overdue(*, since: float, sign: Sign | None, now: float, deadline_s: float) -> float | None:
    """Seconds without a sign of life when that is over the deadline, else None. `since`
    (the service's start) counts as a sign; until its first real one a service has
    `STARTUP_S` at least (as systemd's start timeout is apart from its watchdog)."""
    started = sign is not None and sign.at >= since
    last = sign.at if sign is not None and started else since
    silent = now - last
    return silent if silent > (deadline_s if started else max(deadline_s, STARTUP_S)) else None


def stamp_sign(path: Path, what: str) -> Sign | None:
    """The sign a service left by touching `path`, None if it never did."""
    try:
        return Sign(path.stat().st_mtime, what)
    except OSError:
        return None


def web_sign(url: str, timeout: float) -> Sign | None:
    try:
        with urllib.request.urlopen(f"{url}healthz", timeout=timeout) as reply:
            if reply.status == 200:
                return Sign(time.time(), "answered /healthz")
    except OSError:
        pass
    return None


def worker_sign(timeout: float) -> Sign | None:
    """Celery's ping over the broker, answered by the worker's consumer."""
    from simrun_site.celery import app

    try:
        replies = app.control.ping(timeout=timeout, limit=1)
    except Exception:  # the broker refused (a full disk, say): no sign, and no crash
        return None
    return Sign(time.time(), "answered a ping") if replies else None


@dataclass
class Prober:
    """Collects the signs of life of serve's services and the state of its disks."""

    data_dir: Path
    url: str
    deadline_s: float
    disks: list[Path]
    min_free: int
    signs: dict[str, Sign]
    disk: DiskFull | None = None
    ping: Callable[[float], Sign | None] = worker_sign

    def __post_init__(self) -> None:
        self.rounds = 0  # probes done: serve saves its record after each
        self.full_at = 0.0  # when a disk was last seen full: silence before it is forgiven
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def every_s(self) -> float:
        return max(0.5, self.deadline_s / 4)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="simrun-liveness", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.probe()
            except Exception as exc:  # a probe must never end the thread that judges
                print(f"simrun: a liveness probe failed: {exc!r}", file=sys.stderr, flush=True)

    def probe(self) -> None:
        """One round: the disks, then a sign of each service."""
        disk = disk_full(self.disks, min_free=self.min_free)
        timeout = min(10.0, self.deadline_s / 2)
        found = {
            "web": web_sign(self.url, timeout),
            "worker": self.ping(timeout),
            "beat": stamp_sign(self.data_dir / STAMPS / "beat", "ticked"),
            "watcher": stamp_sign(self.data_dir / STAMPS / "watcher", "reconciled"),
        }
        with self._lock:
            self.disk = disk
            if disk is not None:
                self.full_at = time.time()
            for name, sign in found.items():
                if sign is not None:
                    self.signs[name] = sign
            self.rounds += 1

    def sign(self, name: str) -> Sign | None:
        with self._lock:
            return self.signs.get(name)

    def forget(self, name: str) -> None:
        """A service started again: its earlier signs are not its new process's."""
        with self._lock:
            self.signs.pop(name, None)


def stamp_dir(data_dir: Path) -> Path:
    folder = data_dir / STAMPS
    folder.mkdir(exist_ok=True)
    for name in ("beat", "watcher"):
        (folder / name).unlink(missing_ok=True)
    return folder


def ago(sign: Sign | None, now: float) -> str:
    """`answered /healthz 3 s ago`, or `none yet`."""
    if sign is None:
        return "none yet"
    return f"{sign.what} {max(0, int(now - sign.at))} s ago"

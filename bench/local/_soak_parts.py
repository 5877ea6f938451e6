"""The soak's `simrun serve` (started, killed, started again, stopped as an operator would) and
its small disk (a tmpfs it fills once)."""

from __future__ import annotations

import contextlib
import math
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.local._chaos import service_restarts

ROOT = Path(__file__).resolve().parents[2]
SIMRUN = Path(sys.executable).parent / "simrun"
START_TIMEOUT_S = 180.0


def percentile(values: list[float], p: float) -> float | None:
    """The nearest-rank percentile `p` of `values`, None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)], 1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """`simrun serve` of the soak's data directory, on one port throughout (a serve started
    again takes the port its killed predecessor had)."""

    def __init__(self, data_dir: Path, env: dict[str, str], work: Path) -> None:
        self.data_dir, self.env, self.work = data_dir, env, work
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.manual_restarts = 0
        self.restarted_after_kill = 0
        self.gave_up: list[str] = []
        self._earlier: dict[str, int] = {}  # restarts counted by earlier serves
        self._lock = threading.Lock()  # the chaos's thread and the submitting one

    def start(self) -> None:
        out = self.work / "serve.out"
        before = out.read_text().count("serving on") if out.exists() else 0
        with out.open("ab") as stdout, (self.work / "serve.err").open("ab") as stderr:
            self.proc = subprocess.Popen(
                [str(SIMRUN), "serve", "--port", str(self.port)],
                cwd=ROOT,
                env=self.env,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while out.read_text().count("serving on") <= before:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"simrun serve did not start; see {self.work}")
            time.sleep(0.5)

    def _count_restarts(self) -> None:
        for name, count in service_restarts(self.data_dir).items():
            self._earlier[name] = self._earlier.get(name, 0) + count

    def kill_and_start_again(self) -> int | None:
        """kill -9 of serve, then `simrun serve` again (the operator's answer); its pid."""
        with self._lock:
            if self.proc is None or self.proc.poll() is not None:
                return None
            pid = self.proc.pid
            self._count_restarts()
            self.proc.kill()
            self.proc.wait()
            self.start()
            self.restarted_after_kill += 1
            return pid

    def keep_up(self) -> None:
        """Start serve again if it exited by itself (it gave up): a manual action, counted."""
        with self._lock:
            if self.proc is not None and self.proc.poll() is not None:
                self.gave_up.append(f"exit {self.proc.returncode}")
                self.manual_restarts += 1
                self._count_restarts()
                self.start()

    def restarts(self) -> dict[str, int]:
        """The restarts serve did by itself, per service, over every serve of the soak."""
        now = service_restarts(self.data_dir)
        names = set(now) | set(self._earlier)
        return {n: self._earlier.get(n, 0) + now.get(n, 0) for n in sorted(names)}

    def stop(self) -> str:
        """`simrun stop`, as an operator ends the installation; what it said."""
        with self._lock:
            said = subprocess.run(
                [str(SIMRUN), "stop"],
                cwd=ROOT,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if self.proc is not None:
                self.proc.wait(timeout=60)
            return (said.stdout + said.stderr).strip()


class Disk:
    """A tmpfs of a given size for the data directory, filled once and freed."""

    def __init__(self, path: Path, mounted: bool, reason: str) -> None:
        self.path, self.mounted, self.reason = path, mounted, reason
        self.started = time.monotonic()
        self.filled_at: float | None = None
        self.freed_at: float | None = None

    @classmethod
    def mount(cls, path: Path, size_mb: int) -> Disk:
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
        reason = "" if done.returncode == 0 else f"cannot mount a tmpfs: {done.stderr.strip()}"
        return cls(path, done.returncode == 0, reason)

    def fill_for(self, at_s: float, hold_s: float, stop: threading.Event) -> None:
        """At `at_s` seconds, fill the disk; `hold_s` seconds later, free it."""
        if stop.wait(at_s):
            return
        filler = self.path / "filler"
        self.filled_at = time.monotonic() - self.started
        print(f"{self.filled_at:7.1f}s chaos: the disk is filled", flush=True)
        with filler.open("wb", buffering=0) as out:
            for size in (1 << 20, 4096, 1):
                with contextlib.suppress(OSError):
                    while out.write(b"\0" * size):
                        pass
        time.sleep(hold_s)  # the soak goes on meanwhile: freeing is not skipped by a stop
        filler.unlink()
        self.freed_at = time.monotonic() - self.started
        print(f"{self.freed_at:7.1f}s chaos: the disk is freed", flush=True)

    def report(self) -> dict[str, Any]:
        if not self.mounted:
            return {"skipped": self.reason}
        full = None
        if self.filled_at is not None and self.freed_at is not None:
            full = round(self.freed_at - self.filled_at, 1)
        return {
            "filled_at_s": None if self.filled_at is None else round(self.filled_at, 1),
            "freed_at_s": None if self.freed_at is None else round(self.freed_at, 1),
            "full_s": full,
        }

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False)

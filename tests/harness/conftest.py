"""A run store with tasks, and the harness's console scripts as real processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from simrun_harness.exits import EXIT_POOL_BROKEN
from simrun_harness.layout import StorePaths, TaskPaths
from simrun_harness.progress import read_progress
from simrun_harness.report import WorkerReport, read_report
from tests.waiting import wait_for

# The console scripts under test; point SIMRUN_TEST_HARNESS_BIN at another environment's bin
# directory to run them on another Python (the harness must also run on 3.11).
BIN = Path(os.environ.get("SIMRUN_TEST_HARNESS_BIN") or Path(sys.executable).parent)
MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"


@dataclass
class Started:
    """A harness process started in its own process group (like a pod)."""

    process: subprocess.Popen[bytes]
    stderr: Path
    worker: str

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")

    def wait_log(self, text: str, timeout: float = 60.0) -> None:
        """Wait until the process's stderr contains `text`."""
        wait_for(lambda: text in self.log(), timeout=timeout, what=f"{text!r} from {self.worker}")

    def signal_group(self, signum: int) -> None:
        os.killpg(self.process.pid, signum)

    def wait(self, timeout: float = 60.0) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.worker} did not exit:\n{self.log()}") from None


@dataclass
class Store:
    """One run in a fresh store, its tasks, and the processes the test started."""

    root: Path
    run_id: str = "r1"
    started: list[Started] = field(default_factory=list)

    @property
    def run_dir(self) -> Path:
        return StorePaths(self.root).run(self.run_id).root

    @property
    def snapshots(self) -> Path:
        return StorePaths(self.root).snapshots

    def task(self, task_id: str = "t") -> TaskPaths:
        return StorePaths(self.root).run(self.run_id).task(task_id)

    def write_task(
        self,
        type_name: str,
        settings: dict[str, Any],
        *,
        task_id: str = "t",
        inputs: dict[str, str] | None = None,
        model: str | None = None,
    ) -> TaskPaths:
        paths = self.task(task_id)
        paths.root.mkdir(parents=True, exist_ok=True)
        record = {
            "task": task_id,
            "type": type_name,
            "settings": settings,
            "inputs": inputs or {},
            "model": model,
        }
        paths.task_file.write_text(json.dumps(record))
        return paths

    def add_model(self, name: str = "repressilator") -> str:
        """Copy an example model into the snapshots; returns its path relative to them."""
        target = self.snapshots / f"{name}-snapshot"
        target.mkdir(parents=True, exist_ok=True)
        for source in (MODELS / name).iterdir():
            (target / source.name).write_bytes(source.read_bytes())
        return target.name

    def env(
        self,
        worker: str = "t-w0",
        *,
        task_id: str = "t",
        role: str = "base",
        stale_s: float = 1.5,
        processes: int = 1,
        per_worker_gb: float = 1.0,
        **extra: str,
    ) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SIMRUN_")}
        env.update(
            SIMRUN_WORKER=worker,
            SIMRUN_ROLE=role,
            SIMRUN_STALE_S=str(stale_s),
            SIMRUN_ATTEMPT="0",
            SIMRUN_NODE="node-a",
            SIMRUN_MEMORY_PER_WORKER_GB=str(per_worker_gb),
            SIMRUN_PROCESSES=str(processes),
            SIMRUN_RUN_DIR=str(self.run_dir),
            SIMRUN_TASK_DIR=str(self.task(task_id).root),
            SIMRUN_SNAPSHOTS_DIR=str(self.snapshots),
            SIMRUN_SCRATCH=str(self.root.parent / "scratch" / worker),
        )
        env.update(extra)
        return env

    def start(self, script: str, env: dict[str, str]) -> Started:
        """Start `simrun-worker`, `simrun-merge` or `simrun-exec` as a new process group."""
        name = env.get("SIMRUN_WORKER") or script
        stderr = self.root.parent / f"{name}-{len(self.started)}.log"
        with stderr.open("wb") as handle:
            process = subprocess.Popen(
                [str(BIN / script)],
                env=env,
                stdout=handle,
                stderr=handle,
                start_new_session=True,
            )
        started = Started(process, stderr, name)
        self.started.append(started)
        return started

    def run(self, script: str, env: dict[str, str], timeout: float = 60.0) -> int:
        return self.start(script, env).wait(timeout)

    def report(self, worker: str, task_id: str = "t", attempt: int = 0) -> WorkerReport:
        return read_report(self.task(task_id).report(worker, attempt))

    def killed_for_memory(self, worker: str) -> WorkerReport:
        """The report of an attempt the harness ended for memory: exit 137, one kill of its
        own, and an error naming the unit."""
        report = self.report(worker)
        assert report.exit_code == EXIT_POOL_BROKEN
        assert report.oom_kills == 1 and report.harness_oom_kills == 1
        assert report.error is not None and report.error.unit is not None
        return report

    def done_units(self, task_id: str = "t") -> list[str]:
        """Units of `unit_done` progress lines, in file order."""
        return [
            e.unit
            for e in read_progress(self.task(task_id).progress)
            if e.event == "unit_done" and e.unit
        ]

    def claimed_by(self, worker: str, task_id: str = "t") -> list[str]:
        claimed = self.task(task_id).claimed
        if not claimed.is_dir():
            return []
        return [n.split("@")[0] for n in os.listdir(claimed) if n.split("@")[1] == worker]

    def wait_claims(self, worker: str, count: int = 1, task_id: str = "t") -> list[str]:
        """Wait until `worker` holds at least `count` claims; returns them."""

        def held() -> list[str] | None:
            found = self.claimed_by(worker, task_id)
            return found if len(found) >= count else None

        claims = wait_for(held, timeout=60, what=f"{count} claims of {worker}")
        assert claims is not None
        return claims


@pytest.fixture
def run_store(tmp_path: Path) -> Iterator[Store]:
    """A fresh run store; every process a test started is killed at its end."""
    root = tmp_path / "store"
    (root / "snapshots").mkdir(parents=True)
    made = Store(root)
    yield made
    for started in made.started:
        if started.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(started.pid, signal.SIGKILL)
            started.process.wait(10)


def out_files(paths: TaskPaths) -> dict[str, bytes]:
    """Every file of a task output except the marker, by relative path."""
    return {
        str(p.relative_to(paths.out)): p.read_bytes()
        for p in sorted(paths.out.rglob("*"))
        if p.is_file() and p.name != ".simrun-merged"
    }


def expected_counting_output(units: int) -> dict[str, bytes]:
    """The merged output of the counting test types (sleep, fail, allocate) for `units`."""
    files = {f"unit-{i}.json": json.dumps({"unit": i}).encode() for i in range(units)}
    files["units.json"] = json.dumps(list(range(units))).encode()
    return files

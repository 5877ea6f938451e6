"""Small runs for the local backend's tests: shapes, tasks and launches (`tests/builders.py`,
tier "agent", workflows `wf-<run>`), fake environments."""

from __future__ import annotations

import textwrap
from pathlib import Path

from cluster.local.attempts import ProcessId, read_attempts
from tests.builders import LOCAL, PY

NODE = "test-node"
shape = LOCAL.shape
command_task = LOCAL.command_task
split_task = LOCAL.split_task
launch = LOCAL.launch


def pod_processes(store: Path, run_id: str, pod: str) -> list[ProcessId]:
    """The supervisor and pod process ids of every attempt of a pod."""
    found = []
    for attempt in read_attempts(store / "runs" / run_id / "pods" / pod):
        found += [p for p in (attempt.supervisor, attempt.child) if p is not None]
    return found


def fake_environment(store: Path, name: str, scripts: dict[str, str]) -> str:
    """An environment whose console scripts are the given Python programs."""
    bin_dir = store / "environments" / name / "bin"
    bin_dir.mkdir(parents=True)
    for script, body in scripts.items():
        path = bin_dir / script
        path.write_text(f"#!{PY}\n" + textwrap.dedent(body))
        path.chmod(0o755)
    return name


def released_by(path: Path) -> str:
    """A pod's program that runs until `path` exists (the test releases it)."""
    return f"import pathlib, time\nwhile not pathlib.Path({str(path)!r}).exists(): time.sleep(0.02)"

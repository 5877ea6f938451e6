"""Fixtures of the local backend's tests: a store, a backend on it, launches of small runs.

Every test's processes are real; the teardown kills whatever a test left running.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from cluster.local.attempts import read_attempts
from cluster.local.backend import LocalBackend
from runs.priorities import value_of
from tests.cluster.local.builders import NODE


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    root.mkdir()
    return root


def all_attempt_processes(store: Path) -> list[psutil.Process]:
    """Every live supervisor, pod process and descendant recorded under the store."""
    found: list[psutil.Process] = []
    for pod_dir in store.glob("runs/*/pods/*"):
        for attempt in read_attempts(pod_dir):
            for pid in (attempt.supervisor, attempt.child):
                proc = pid.process() if pid else None
                if proc is not None:
                    found.append(proc)
                    with contextlib.suppress(psutil.Error):
                        found.extend(proc.children(recursive=True))
    return found


@pytest.fixture
def make_backend(store: Path) -> Iterator[Callable[..., LocalBackend]]:
    made: list[LocalBackend] = []

    def make(**overrides: object) -> LocalBackend:
        options: dict[str, object] = {
            "cores": 2,
            "memory_gb": 4,
            "node_name": NODE,
            "priority_value": value_of,
            "poll_s": 0.1,
            "memory_poll_s": 0.05,
            "kill_margin_s": 2.0,
        }
        options.update(overrides)
        backend = LocalBackend(store, **options)  # type: ignore[arg-type]
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
    for proc in all_attempt_processes(store):
        with contextlib.suppress(psutil.Error):
            proc.kill()


@pytest.fixture
def backend(make_backend: Callable[..., LocalBackend]) -> LocalBackend:
    return make_backend()

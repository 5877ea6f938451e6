"""A run store that refuses writes is the store's failure (exit 5, the path), not a unit's.

The store is made read-only for real: a read-only bind mount of the task directory (the
suite runs as root, whom file modes do not stop).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from simrun_harness.exits import EXIT_STORE
from tests.harness.conftest import Store


@contextmanager
def read_only(directory: Path) -> Iterator[None]:
    subprocess.run(["mount", "--bind", str(directory), str(directory)], check=True)
    try:
        subprocess.run(
            ["mount", "-o", "remount,ro,bind", str(directory)], check=True, capture_output=True
        )
        yield
    finally:
        subprocess.run(["umount", str(directory)], check=True)


def test_a_worker_on_a_read_only_store_exits_5_naming_the_path(run_store: Store) -> None:
    """One line with the cause, the documented exit code, no unit blamed."""
    paths = run_store.write_task("sleep", {"units": 2, "seconds": 0.1})
    with read_only(paths.root):
        worker = run_store.start("simrun-worker", run_store.env("t-w0"))
        code = worker.wait()
    assert code == EXIT_STORE, worker.log()
    said = [line for line in worker.log().splitlines() if "store is not writable" in line]
    assert said == [
        f"simrun-worker: the store is not writable: {paths.root} (Read-only file system)"
    ]
    assert "Traceback" not in worker.log()


def test_a_merge_on_a_read_only_store_exits_5(run_store: Store) -> None:
    paths = run_store.write_task("sleep", {"units": 2, "seconds": 0.1})
    with read_only(paths.root):
        merge = run_store.start("simrun-merge", run_store.env("t-merge"))
        code = merge.wait()
    assert code == EXIT_STORE, merge.log()
    assert f"the store is not writable: {paths.root}" in merge.log()

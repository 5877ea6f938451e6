"""The local backend's reads of a run's pod files never follow a link: a run's code (the
service's user here) may replace its `pods` directory, a pod's directory or an attempt's
with a link; each reads as absent and nothing behind the link is read or listed
(docs/security.md)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from cluster.local.attempts import read_attempts, remove_partial_units
from cluster.local.run_files import STOPPED, RunFiles
from cluster.local.statuses import run_listing
from simrun_harness.layout import StorePaths
from tests.cluster.local.builders import command_task, launch, shape


def waiting_run(store: Path) -> RunFiles:
    """A run whose one pod `t` has its directory and no attempt yet."""
    run = RunFiles(StorePaths(store).run("r1"))
    run.pods.mkdir(parents=True)
    run.create(launch("r1", command_task("t", "pass", pod=shape(cores=1))))
    (run.pods / "t").mkdir()
    return run


def attempt_files(folder: Path) -> Path:
    """An attempt's files as a pod would leave them, somewhere else."""
    folder.mkdir(parents=True)
    spec = {"attempt": 0, "created": 1.0, "cores": 1.0, "memory_limit_gb": 0.5}
    (folder / "attempt.json").write_text(json.dumps(spec))
    return folder


def test_an_attempt_directory_replaced_by_a_link_reads_as_absent(tmp_path: Path) -> None:
    run = waiting_run(tmp_path / "store")
    os.symlink(attempt_files(tmp_path / "outside" / "0"), run.pods / "t" / "0")

    assert read_attempts(run.pods / "t") == []


def test_a_pod_directory_replaced_by_a_link_is_neither_read_nor_listed(tmp_path: Path) -> None:
    run = waiting_run(tmp_path / "store")
    attempt_files(tmp_path / "outside" / "0")
    (run.pods / "t").rmdir()
    os.symlink(tmp_path / "outside", run.pods / "t")

    assert read_attempts(run.pods / "t") == []
    assert run_listing(run, run.launch()[0]).attempts == {"t": []}


def test_a_pods_directory_replaced_by_a_link_reads_as_absent(tmp_path: Path) -> None:
    run = waiting_run(tmp_path / "store")
    outside = tmp_path / "outside"
    shutil.copytree(run.pods, outside)
    (outside / STOPPED).write_text(json.dumps({"at": 5.0}))
    shutil.rmtree(run.pods)
    os.symlink(outside, run.pods)

    assert run.marked_at(STOPPED) is None


def test_an_ended_pods_half_written_units_are_removed_but_never_through_a_link(
    tmp_path: Path,
) -> None:
    env = {"SIMRUN_TASK_DIR": "", "SIMRUN_WORKER": "w0", "SIMRUN_ATTEMPT": "1"}
    inside = tmp_path / "task"
    (inside / "units" / ".u000001.w0@1.42").mkdir(parents=True)
    (inside / "units" / ".u000002.w9@1.43").mkdir()  # another holder's: left alone
    outside = tmp_path / "task-linked"
    outside.mkdir()
    (tmp_path / "elsewhere" / ".u000001.w0@1.42").mkdir(parents=True)
    os.symlink(tmp_path / "elsewhere", outside / "units")

    removed = remove_partial_units({**env, "SIMRUN_TASK_DIR": str(inside)})
    through_link = remove_partial_units({**env, "SIMRUN_TASK_DIR": str(outside)})

    assert removed == [".u000001.w0@1.42"]
    assert sorted(os.listdir(inside / "units")) == [".u000002.w9@1.43"]
    assert through_link == []
    assert (tmp_path / "elsewhere" / ".u000001.w0@1.42").is_dir()

"""The environment both backends give a pod (`simrun_harness.pod_env`) is the one the harness
reads (`simrun_harness.config`): what one writes, the other reads back."""

from __future__ import annotations

from pathlib import Path

from simrun_harness.config import single_config, worker_config
from simrun_harness.pod_env import STALE_MARGIN_S, pod_env


def places(tmp_path: Path) -> dict[str, str]:
    run = tmp_path / "run"
    (run / "tasks" / "scan").mkdir(parents=True)
    (tmp_path / "snapshots").mkdir()
    return {
        "run_dir": str(run),
        "task_dir": str(run / "tasks" / "scan"),
        "scratch": str(tmp_path / "scratch"),
        "snapshots_dir": str(tmp_path / "snapshots"),
    }


def test_a_worker_reads_back_every_value_its_backend_gave_it(tmp_path: Path) -> None:
    """M3, M10: attempt, node, memory, processes, cores, role and the stale time of grace
    + 60 s."""
    env = pod_env(
        run_id="r1",
        task_id="scan",
        worker="scan-w1",
        attempt=2,
        grace_s=30,
        cores=1.5,
        role="extra",
        coordinator_merges=True,
        node="node-a",
        memory_limit_gb=2.5,
        memory_per_worker_gb=0.25,
        processes=3,
        **places(tmp_path),
    )
    config = worker_config(env)
    common = config.common
    assert (common.attempt, common.node, common.grace_s, common.memory_limit_gb) == (
        2,
        "node-a",
        30,
        2.5,
    )
    assert (config.worker, config.role, config.stale_s) == ("scan-w1", "extra", 30 + 60)
    assert (config.memory_per_worker_gb, config.processes, config.cores) == (0.25, 3, 1.5)
    assert config.coordinator_merges and STALE_MARGIN_S == 60
    assert common.snapshots_dir == tmp_path / "snapshots"


def test_a_merge_is_no_worker_and_the_tasks_own_variables_come_last(tmp_path: Path) -> None:
    """M4: a pod without a role gets no worker's variables; the task's own win over simrun's."""
    env = pod_env(
        run_id="r1",
        task_id="scan",
        worker="scan-merge",
        attempt=0,
        grace_s=30,
        cores=1,
        node="node-a",
        task_env={"SIMRUN_GRACE_S": "5", "OMP_NUM_THREADS": "1"},
        **(places(tmp_path) | {"snapshots_dir": None}),
    )
    assert not {"SIMRUN_ROLE", "SIMRUN_STALE_S", "SIMRUN_SNAPSHOTS_DIR"} & set(env)
    assert (env["SIMRUN_GRACE_S"], env["OMP_NUM_THREADS"]) == ("5", "1")
    config = single_config(env)
    assert (config.worker, config.common.grace_s, config.common.snapshots_dir) == (
        "scan-merge",
        5,
        None,
    )

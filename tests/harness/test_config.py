"""Configuration from SIMRUN_* variables: a missing or malformed one exits 4 naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from simrun_harness.config import (
    ConfigError,
    available_cores,
    resolve_processes,
    single_config,
    worker_config,
)
from simrun_harness.exits import EXIT_CONFIGURATION
from tests.harness.conftest import Store


def _env(tmp_path: Path, **changes: str | None) -> dict[str, str]:
    run = tmp_path / "run"
    (run / "tasks" / "t").mkdir(parents=True, exist_ok=True)
    env = {
        "SIMRUN_WORKER": "t-w0",
        "SIMRUN_ROLE": "base",
        "SIMRUN_STALE_S": "90",
        "SIMRUN_ATTEMPT": "0",
        "SIMRUN_NODE": "node-a",
        "SIMRUN_MEMORY_PER_WORKER_GB": "0.5",
        "SIMRUN_RUN_DIR": str(run),
        "SIMRUN_TASK_DIR": str(run / "tasks" / "t"),
        "SIMRUN_SCRATCH": str(tmp_path / "scratch"),
    }
    for name, value in changes.items():
        if value is None:
            env.pop(name)
        else:
            env[name] = value
    return env


def test_a_complete_worker_configuration_is_read(tmp_path: Path) -> None:
    config = worker_config(_env(tmp_path, SIMRUN_COORDINATOR_MERGES="1", SIMRUN_PROCESSES="3"))
    assert config.worker == "t-w0" and config.role == "base"
    assert config.stale_s == 90 and config.heartbeat_s == 22.5
    assert config.processes == 3 and config.coordinator_merges
    assert config.common.attempt == 0 and config.common.node == "node-a"
    assert config.common.scratch.is_dir()


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"SIMRUN_WORKER": None}, "SIMRUN_WORKER"),
        ({"SIMRUN_WORKER": "../evil"}, "SIMRUN_WORKER"),
        ({"SIMRUN_ROLE": "boss"}, "SIMRUN_ROLE"),
        ({"SIMRUN_STALE_S": "soon"}, "SIMRUN_STALE_S"),
        ({"SIMRUN_STALE_S": "-1"}, "SIMRUN_STALE_S"),
        ({"SIMRUN_ATTEMPT": "-1"}, "SIMRUN_ATTEMPT"),
        ({"SIMRUN_NODE": None}, "SIMRUN_NODE"),
        ({"SIMRUN_MEMORY_PER_WORKER_GB": "lots"}, "SIMRUN_MEMORY_PER_WORKER_GB"),
        ({"SIMRUN_PROCESSES": "0"}, "SIMRUN_PROCESSES"),
        ({"SIMRUN_RUN_DIR": "relative/run"}, "SIMRUN_RUN_DIR"),
        ({"SIMRUN_TASK_DIR": "/nowhere/at/all"}, "SIMRUN_TASK_DIR"),
        ({"SIMRUN_HEARTBEAT_S": "120"}, "SIMRUN_HEARTBEAT_S"),
        ({"SIMRUN_COORDINATOR_MERGES": "maybe"}, "SIMRUN_COORDINATOR_MERGES"),
        ({"SIMRUN_MEMORY_LIMIT_GB": "0"}, "SIMRUN_MEMORY_LIMIT_GB"),
    ],
)
def test_a_missing_or_malformed_variable_is_named(
    tmp_path: Path, changes: dict[str, str | None], named: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        worker_config(_env(tmp_path, **changes))


def test_merge_and_exec_need_no_worker_variables(tmp_path: Path) -> None:
    env = _env(tmp_path, SIMRUN_WORKER=None, SIMRUN_ROLE=None, SIMRUN_STALE_S=None)
    config = single_config(env)
    assert config.worker is None and config.memory_per_worker_gb == 0.5


def _processes(
    *,
    cores: float | None,
    limit_gb: float | None,
    explicit: int | None = None,
    cores_per_process: float = 1.0,
) -> int:
    return resolve_processes(
        explicit=explicit,
        cores=cores,
        cores_per_process=cores_per_process,
        memory_limit_gb=limit_gb,
        memory_base_gb=0.5,
        memory_per_worker_gb=1.0,
    )


def test_processes_follow_cores_and_memory() -> None:
    assert _processes(cores=4, limit_gb=None) == 4
    assert _processes(cores=8, limit_gb=2.5) == 2  # (2.5 - 0.5 base) / 1 per worker
    assert _processes(cores=8, limit_gb=0.6) == 1
    assert _processes(cores=1, limit_gb=1, explicit=7) == 7
    assert _processes(cores=1.5, limit_gb=None, cores_per_process=0.5) == 3
    assert available_cores(2.5, 4.0) == 2.5 and available_cores(None, 4.0) == 4.0


def test_the_worker_exits_4_naming_a_missing_variable(run_store: Store) -> None:
    run_store.write_task("sleep", {"units": 1})
    env = run_store.env("t-w0")
    del env["SIMRUN_STALE_S"]

    worker = run_store.start("simrun-worker", env)

    assert worker.wait() == EXIT_CONFIGURATION
    assert "SIMRUN_STALE_S is not set" in worker.log()


def test_an_unknown_type_exits_4_with_a_report(run_store: Store) -> None:
    run_store.write_task("no_such_type", {})

    worker = run_store.start("simrun-worker", run_store.env("t-w0"))

    assert worker.wait() == EXIT_CONFIGURATION
    report = run_store.report("t-w0")
    assert report.exit_code == EXIT_CONFIGURATION
    assert report.error is not None and "no_such_type" in report.error.message


def test_an_unknown_setting_exits_4_naming_it(run_store: Store) -> None:
    run_store.write_task("sleep", {"units": 2, "colour": "blue"})

    worker = run_store.start("simrun-worker", run_store.env("t-w0"))

    assert worker.wait() == EXIT_CONFIGURATION
    assert "settings.colour" in worker.log()

"""The configuration of a harness process, read only from SIMRUN_* environment variables.

A missing or malformed variable raises `ConfigError` naming it; the console scripts turn that
into exit 4 (`exits.EXIT_CONFIGURATION`). The variables are documented in docs/harness.md.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from simrun_harness.layout import check_name

Role = Literal["base", "extra"]
DEFAULT_GRACE_S = 30.0
HEARTBEATS_PER_STALE = 4


class ConfigError(Exception):
    """A configuration that cannot work; the message names the variable or file."""


def _raw(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigError(f"{name} is not set")
    return value


def _optional(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _float(text: str, name: str, *, minimum: float = 0.0, strict: bool = True) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r} is not a number") from None
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        bound = ">" if strict else ">="
        raise ConfigError(f"{name}={text!r} must be a finite number {bound} {minimum:g}")
    return value


def _int(text: str, name: str, *, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(f"{name}={text!r} must be >= {minimum}")
    return value


def _dir(env: Mapping[str, str], name: str, *, create: bool = False) -> Path:
    path = Path(_raw(env, name))
    if not path.is_absolute():
        raise ConfigError(f"{name}={str(path)!r} must be an absolute path")
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"{name}={str(path)!r} cannot be created: {exc}") from None
    if not path.is_dir():
        raise ConfigError(f"{name}={str(path)!r} is not a directory")
    return path


def _bool(env: Mapping[str, str], name: str) -> bool:
    text = _optional(env, name)
    if text is None:
        return False
    if text.lower() in {"1", "true", "yes"}:
        return True
    if text.lower() in {"0", "false", "no"}:
        return False
    raise ConfigError(f"{name}={text!r} must be 1 or 0")


@dataclass(frozen=True)
class CommonConfig:
    """What every harness process needs: where the run lives and who it is."""

    run_dir: Path
    task_dir: Path
    scratch: Path
    snapshots_dir: Path | None
    attempt: int
    node: str
    memory_limit_gb: float | None
    grace_s: float
    cgroup_root: Path | None


@dataclass(frozen=True)
class WorkerConfig:
    """A worker of a split task (`simrun-worker`)."""

    common: CommonConfig
    worker: str
    role: Role
    stale_s: float
    heartbeat_s: float
    memory_per_worker_gb: float
    processes: int | None
    cores: float | None
    coordinator_merges: bool


@dataclass(frozen=True)
class SingleConfig:
    """A merge (`simrun-merge`) or an unsplit run (`simrun-exec`): one process of work."""

    common: CommonConfig
    worker: str | None
    memory_per_worker_gb: float | None


def _common(env: Mapping[str, str]) -> CommonConfig:
    run_dir = _dir(env, "SIMRUN_RUN_DIR")
    task_dir = _dir(env, "SIMRUN_TASK_DIR")
    if not task_dir.resolve().is_relative_to(run_dir.resolve()):
        raise ConfigError(f"SIMRUN_TASK_DIR={str(task_dir)!r} is not inside SIMRUN_RUN_DIR")
    snapshots = _optional(env, "SIMRUN_SNAPSHOTS_DIR")
    limit = _optional(env, "SIMRUN_MEMORY_LIMIT_GB")
    grace = _optional(env, "SIMRUN_GRACE_S")
    cgroup = _optional(env, "SIMRUN_CGROUP_ROOT")
    node = _raw(env, "SIMRUN_NODE")
    return CommonConfig(
        run_dir=run_dir,
        task_dir=task_dir,
        scratch=_dir(env, "SIMRUN_SCRATCH", create=True),
        snapshots_dir=_dir(env, "SIMRUN_SNAPSHOTS_DIR") if snapshots else None,
        attempt=_int(_raw(env, "SIMRUN_ATTEMPT"), "SIMRUN_ATTEMPT", minimum=0),
        node=node,
        memory_limit_gb=_float(limit, "SIMRUN_MEMORY_LIMIT_GB") if limit else None,
        grace_s=_float(grace, "SIMRUN_GRACE_S", strict=False) if grace else DEFAULT_GRACE_S,
        cgroup_root=Path(cgroup) if cgroup else None,
    )


def _worker_name(text: str, name: str) -> str:
    try:
        return check_name(text, what=name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def worker_config(env: Mapping[str, str] | None = None) -> WorkerConfig:
    """The configuration of `simrun-worker` (raises ConfigError)."""
    env = os.environ if env is None else env
    common = _common(env)
    worker = _worker_name(_raw(env, "SIMRUN_WORKER"), "SIMRUN_WORKER")
    role = _raw(env, "SIMRUN_ROLE")
    if role not in ("base", "extra"):
        raise ConfigError(f"SIMRUN_ROLE={role!r} must be 'base' or 'extra'")
    stale_s = _float(_raw(env, "SIMRUN_STALE_S"), "SIMRUN_STALE_S")
    heartbeat = _optional(env, "SIMRUN_HEARTBEAT_S")
    heartbeat_s = (
        _float(heartbeat, "SIMRUN_HEARTBEAT_S") if heartbeat else stale_s / HEARTBEATS_PER_STALE
    )
    if heartbeat_s >= stale_s:
        raise ConfigError(f"SIMRUN_HEARTBEAT_S={heartbeat_s:g} must be below SIMRUN_STALE_S")
    per_worker = _float(_raw(env, "SIMRUN_MEMORY_PER_WORKER_GB"), "SIMRUN_MEMORY_PER_WORKER_GB")
    processes = _optional(env, "SIMRUN_PROCESSES")
    cores = _optional(env, "SIMRUN_CORES")
    return WorkerConfig(
        common=common,
        worker=worker,
        role="base" if role == "base" else "extra",
        stale_s=stale_s,
        heartbeat_s=heartbeat_s,
        memory_per_worker_gb=per_worker,
        processes=_int(processes, "SIMRUN_PROCESSES", minimum=1) if processes else None,
        cores=_float(cores, "SIMRUN_CORES") if cores else None,
        coordinator_merges=_bool(env, "SIMRUN_COORDINATOR_MERGES"),
    )


def single_config(env: Mapping[str, str] | None = None) -> SingleConfig:
    """The configuration of `simrun-merge` and `simrun-exec` (raises ConfigError)."""
    env = os.environ if env is None else env
    common = _common(env)
    worker = _optional(env, "SIMRUN_WORKER")
    per_worker = _optional(env, "SIMRUN_MEMORY_PER_WORKER_GB")
    return SingleConfig(
        common=common,
        worker=_worker_name(worker, "SIMRUN_WORKER") if worker else None,
        memory_per_worker_gb=(
            _float(per_worker, "SIMRUN_MEMORY_PER_WORKER_GB") if per_worker else None
        ),
    )


def resolve_processes(
    *,
    explicit: int | None,
    cores: float | None,
    cores_per_process: float,
    memory_limit_gb: float | None,
    memory_base_gb: float,
    memory_per_worker_gb: float,
) -> int:
    """How many unit processes a worker runs.

    SIMRUN_PROCESSES wins; otherwise the smaller of what the cores allow
    (cores ÷ cores per process) and what the memory allows
    ((limit - base memory of the type) ÷ memory per worker), and at least one.
    """
    if explicit is not None:
        return explicit
    by_cores = math.inf if cores is None else math.floor(cores / cores_per_process + 1e-9)
    by_memory = (
        math.inf
        if memory_limit_gb is None
        else math.floor((memory_limit_gb - memory_base_gb) / memory_per_worker_gb + 1e-9)
    )
    found = min(by_cores, by_memory)
    return 1 if found == math.inf else max(1, int(found))


def available_cores(explicit: float | None, cgroup_cores: float | None) -> float:
    """Cores of this pod: SIMRUN_CORES, else the cgroup quota, else the CPUs we may run on."""
    if explicit is not None:
        return explicit
    if cgroup_cores is not None:
        return cgroup_cores
    try:
        return float(len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return float(os.cpu_count() or 1)

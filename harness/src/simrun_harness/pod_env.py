"""The environment of a pod: the SIMRUN_* variables `config.py` reads, made by one function
both backends call. The local backend gives it each attempt's values; the Argo manifest gives
it the engine's placeholders for what only the engine knows (the attempt, the pod's name and
role) and leaves out what the engine sets itself (the node, from the pod's spec; the memory
values, patched per attempt).
"""

from __future__ import annotations

from collections.abc import Mapping

STALE_MARGIN_S = 60
"""M3: a worker's claims are taken back once its heartbeat is older than its grace and this."""


def pod_env(
    *,
    run_id: str,
    task_id: str,
    worker: str,
    attempt: int | str,
    run_dir: str,
    task_dir: str,
    scratch: str,
    snapshots_dir: str | None,
    grace_s: int,
    cores: float,
    role: str | None = None,
    coordinator_merges: bool = False,
    node: str | None = None,
    memory_limit_gb: float | None = None,
    memory_per_worker_gb: float | None = None,
    processes: int | None = None,
    task_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """M4, M10: what the harness of one pod reads. `role` (base or extra) makes it a worker
    of a split task, with its stale time and whether its coordinator merges; a value left
    None is not set (the engine sets it, or the harness does without). The task's own
    variables come last."""
    env = {
        "PYTHONUNBUFFERED": "1",
        "SIMRUN_RUN": run_id,
        "SIMRUN_TASK": task_id,
        "SIMRUN_WORKER": worker,
        "SIMRUN_ATTEMPT": str(attempt),
        "SIMRUN_RUN_DIR": run_dir,
        "SIMRUN_TASK_DIR": task_dir,
        "SIMRUN_SCRATCH": scratch,
        "SIMRUN_GRACE_S": str(grace_s),
        "SIMRUN_CORES": f"{cores:g}",
    }
    optional = {
        "SIMRUN_SNAPSHOTS_DIR": snapshots_dir,
        "SIMRUN_NODE": node,
        "SIMRUN_MEMORY_LIMIT_GB": None if memory_limit_gb is None else f"{memory_limit_gb:g}",
        "SIMRUN_MEMORY_PER_WORKER_GB": (
            None if memory_per_worker_gb is None else f"{memory_per_worker_gb:g}"
        ),
        "SIMRUN_PROCESSES": None if processes is None else str(processes),
    }
    env |= {name: value for name, value in optional.items() if value is not None}
    if role is not None:
        env["SIMRUN_ROLE"] = role
        env["SIMRUN_STALE_S"] = str(grace_s + STALE_MARGIN_S)
        env["SIMRUN_COORDINATOR_MERGES"] = "1" if coordinator_merges else "0"
    return env | dict(task_env or {})

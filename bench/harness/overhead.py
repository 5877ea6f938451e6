"""Benchmark of the harness: per-unit overhead and claim rate, against baselines in one run.

1. The same CPU-bound units (the `spin` example type: each burns a fixed CPU time) run by one
   `simrun-worker` and by a bare `multiprocessing.Pool` (bare_pool.py), on the same number
   of processes, alternately, each as a fresh Python process. The ratio is the harness's wall
   time over the pool's (best of the repeats, and the median of the per-repeat ratios).
2. Claims per second of `Ledger.claim` over bare `os.rename` per second, in the same
   directory kind on the same file system.

    python bench/harness/overhead.py [--repeats 3] [--processes N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from simrun_harness.layout import StorePaths, TaskPaths
from simrun_harness.ledger import Holder, Ledger, create_ledger, unit_names

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
CASES = [(2000, 0.005), (200, 0.1)]
GOALS = {0.005: 1.3, 0.1: 1.05}


def _timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the process tree) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _harness(root: Path, units: int, seconds: float, processes: int) -> tuple[float, float]:
    shutil.rmtree(root, ignore_errors=True)
    run = StorePaths(root).run("bench")
    task = run.task("spin")
    task.root.mkdir(parents=True)
    settings = {"units": units, "seconds": seconds}
    task.task_file.write_text(json.dumps({"task": "spin", "type": "spin", "settings": settings}))
    env = {
        **os.environ,
        "SIMRUN_WORKER": "spin-w0",
        "SIMRUN_ROLE": "base",
        "SIMRUN_STALE_S": "60",
        "SIMRUN_ATTEMPT": "0",
        "SIMRUN_NODE": "bench",
        "SIMRUN_MEMORY_PER_WORKER_GB": "1",
        "SIMRUN_PROCESSES": str(processes),
        "SIMRUN_RUN_DIR": str(run.root),
        "SIMRUN_TASK_DIR": str(task.root),
        "SIMRUN_SCRATCH": str(root / "scratch"),
        "SIMRUN_LOG_LEVEL": "WARNING",
    }
    return _timed([str(BIN / "simrun-worker")], env)


def _bare(units: int, seconds: float, processes: int) -> tuple[float, float]:
    argv = [sys.executable, str(HERE / "bare_pool.py"), str(units), str(seconds)]
    return _timed([*argv, str(processes)])


def pool_overhead(root: Path, repeats: int, processes: int) -> None:
    for units, seconds in CASES:
        harness, bare, ratios = [], [], []
        for _ in range(repeats):
            h = _harness(root / "store", units, seconds, processes)
            b = _bare(units, seconds, processes)
            harness.append(h)
            bare.append(b)
            ratios.append(h[0] / b[0])
        wall_h, wall_b = min(w for w, _ in harness), min(w for w, _ in bare)
        cpu_h, cpu_b = min(c for _, c in harness), min(c for _, c in bare)
        print(
            f"{units} units of {seconds * 1000:g} ms CPU on {processes} processes: "
            f"harness {wall_h:.2f} s, pool {wall_b:.2f} s: ratio {wall_h / wall_b:.3f} "
            f"(goal <= {GOALS[seconds]}; median of the {repeats} paired ratios "
            f"{statistics.median(ratios):.3f}); CPU {cpu_h:.2f} s vs {cpu_b:.2f} s: "
            f"ratio {cpu_h / cpu_b:.3f}, {(cpu_h - cpu_b) / units * 1e6:.0f} us per unit",
            flush=True,
        )


def _rename_rate(directory: Path, count: int) -> float:
    shutil.rmtree(directory, ignore_errors=True)
    pending, claimed = directory / "pending", directory / "claimed"
    pending.mkdir(parents=True)
    claimed.mkdir()
    names = unit_names(count)
    for name in names:
        (pending / name).touch()
    sources = [os.path.join(pending, name) for name in names]
    targets = [os.path.join(claimed, f"{name}@bench@0") for name in names]
    start = time.perf_counter()
    for source, target in zip(sources, targets, strict=True):
        os.rename(source, target)
    return count / (time.perf_counter() - start)


def _claim_rate(directory: Path, count: int) -> float:
    shutil.rmtree(directory, ignore_errors=True)
    paths = TaskPaths(directory)
    create_ledger(paths, list(range(count)), Holder("bench", 0))
    ledger = Ledger(paths, Holder("bench", 0))
    ledger.heartbeat()
    start = time.perf_counter()
    claimed = 0
    while ledger.claim() is not None:
        claimed += 1
    assert claimed == count
    return count / (time.perf_counter() - start)


def claim_rate(root: Path, repeats: int, count: int = 5000) -> None:
    renames, claims = [], []
    for _ in range(repeats):
        renames.append(_rename_rate(root / "renames", count))
        claims.append(_claim_rate(root / "claims", count))
    ratio = max(claims) / max(renames)
    print(
        f"claims: {max(claims):,.0f}/s, bare renames: {max(renames):,.0f}/s, "
        f"ratio {ratio:.3f} (goal >= 0.2)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--dir", type=Path, default=None, help="where the store goes")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="simrun-bench-", dir=args.dir))
    try:
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, store in {root}")
        claim_rate(root, args.repeats)
        pool_overhead(root, args.repeats, args.processes)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

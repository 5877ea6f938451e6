"""Benchmark of the harness: per-unit overhead and claim rate, against baselines in one run.

1. The same CPU-bound units (the `spin` example type: each burns a fixed CPU time and writes
   nothing) run by one `simrun-worker` (ledger, heartbeats, unit directories, progress
   lines, memory watch) and by a bare `multiprocessing.Pool` (bare_pool.py: `starmap` with
   its default chunks, and `imap_unordered` one unit at a time), on the same number of
   processes, in turn, each as a fresh Python process. Printed: wall and CPU time (user +
   system of the process tree), best of the repeats, their ratio, and the median of the
   ratios of each repeat (on a shared machine, the best is the least disturbed).
2. Claims per second of `Ledger.claim` over bare `os.rename` per second, in the same
   directory kind on the same file system.

    python bench/harness/overhead.py [--repeats 3] [--processes N] [--dir DIR] [--boost]
    python bench/harness/overhead.py --sweep 1 2 4 8 16 [--units 4000] [--seconds 0.002]

3. With `--sweep`, the per-unit cost at each number of processes: `--units` units of
   `--seconds` CPU by one `simrun-worker` of N processes and by `Pool.starmap` of N, in turn,
   each case `--repeats` times. Printed per N: CPU seconds of the harness and of the pool
   (best of the repeats) and the harness's extra CPU per unit, `(harness - pool) / units`,
   which must not grow with N. On a machine with fewer cores than N the processes share
   them: the wall time says nothing then, but the CPU each unit costs still does (one
   directory of claims shared by N claimers, a pipe and a progress line per unit, the memory
   sample of N processes).

`--boost` (Linux, root) runs the benchmark in a session of its own whose autogroup has nice
-10, so other sessions' load on a shared machine disturbs both sides less.
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
from simrun_harness.ledger import Holder, Ledger, unit_names
from simrun_harness.ledger_creation import create_ledger

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
CASES = [(2000, 0.005), (200, 0.1)]
GOALS = {0.005: 1.1, 0.1: 1.05}  # the harness at most 1.1x starmap on 5 ms units
BOOSTED = "SIMRUN_BENCH_BOOSTED"
BOOST_NICE = -10


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
    wall, cpu = _timed([str(BIN / "simrun-worker")], env)
    _MAIN_CPU.append(json.loads(task.report("spin-w0", 0).read_text())["main_cpu_seconds"])
    return wall, cpu


_MAIN_CPU: list[float] = []  # the worker's main process's CPU of each `_harness`, from its report


def _bare(units: int, seconds: float, processes: int, mode: str) -> tuple[float, float]:
    argv = [sys.executable, str(HERE / "bare_pool.py"), str(units), str(seconds)]
    return _timed([*argv, str(processes), mode])


def _line(label: str, ours: list[tuple[float, float]], theirs: list[tuple[float, float]]) -> str:
    wall_h, wall_b = min(w for w, _ in ours), min(w for w, _ in theirs)
    cpu_h, cpu_b = min(c for _, c in ours), min(c for _, c in theirs)
    paired = statistics.median(h[0] / b[0] for h, b in zip(ours, theirs, strict=True))
    return (
        f"  vs {label}: wall {wall_h:.2f} s / {wall_b:.2f} s = {wall_h / wall_b:.3f} "
        f"(median of paired ratios {paired:.3f}); CPU {cpu_h:.2f} s / {cpu_b:.2f} s = "
        f"{cpu_h / cpu_b:.3f}"
    )


def pool_overhead(root: Path, repeats: int, processes: int) -> None:
    for units, seconds in CASES:
        harness: list[tuple[float, float]] = []
        bare: dict[str, list[tuple[float, float]]] = {"map": [], "each": []}
        for _ in range(repeats):
            harness.append(_harness(root / "store", units, seconds, processes))
            for mode, runs in bare.items():
                runs.append(_bare(units, seconds, processes, mode))
        print(
            f"{units} units of {seconds * 1000:g} ms CPU, {processes} processes, best of "
            f"{repeats} (goal <= {GOALS[seconds]}):",
            flush=True,
        )
        print(_line("Pool.starmap (default chunks)", harness, bare["map"]), flush=True)
        print(_line("Pool.imap_unordered (one unit at a time)", harness, bare["each"]))


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


def sweep(root: Path, repeats: int, counts: list[int], units: int, seconds: float) -> None:
    """The harness's extra CPU per unit at each number of processes (see the module's 3.)."""
    print(f"{units} units of {seconds * 1000:g} ms CPU, best of {repeats}:", flush=True)
    first: float | None = None
    for processes in counts:
        _MAIN_CPU.clear()
        harness = [_harness(root / "store", units, seconds, processes) for _ in range(repeats)]
        bare = [_bare(units, seconds, processes, "map") for _ in range(repeats)]
        cpu_h, cpu_b = min(c for _, c in harness), min(c for _, c in bare)
        per_unit = (cpu_h - cpu_b) / units * 1e6
        main = min(_MAIN_CPU) / units * 1e6
        first = per_unit if first is None else first
        print(
            f"  {processes:3d} processes: CPU harness {cpu_h:.2f} s, Pool.starmap {cpu_b:.2f} s; "
            f"extra per unit {per_unit:.0f} µs ({per_unit / first:.2f}x that of {counts[0]}), "
            f"of which the main process {main:.0f} µs; "
            f"wall {min(w for w, _ in harness):.2f} s / {min(w for w, _ in bare):.2f} s",
            flush=True,
        )


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
    parser.add_argument("--boost", action="store_true", help="autogroup nice -10 (root)")
    parser.add_argument("--sweep", type=int, nargs="+", help="processes per case, e.g. 1 2 4 8")
    parser.add_argument("--units", type=int, default=4000, help="units per sweep case")
    parser.add_argument("--seconds", type=float, default=0.002, help="CPU s per sweep unit")
    args = parser.parse_args()
    if args.boost and os.environ.get(BOOSTED) != "1":
        argv = [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]]
        env = {**os.environ, BOOSTED: "1"}
        sys.exit(subprocess.call(argv, env=env, start_new_session=True))  # a new autogroup
    if args.boost:
        Path("/proc/self/autogroup").write_text(f"{BOOST_NICE}\n")
    root = Path(tempfile.mkdtemp(prefix="simrun-bench-", dir=args.dir))
    try:
        boost = f", autogroup nice {BOOST_NICE}" if args.boost else ""
        load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs{boost}, load {load}")
        if args.sweep:
            sweep(root, args.repeats, args.sweep, args.units, args.seconds)
            return
        claim_rate(root, args.repeats)
        pool_overhead(root, args.repeats, args.processes)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Benchmark: one reconcile tick with 1,000 live runs ÷ with 10, on the local backend.

Each live run is what a running split scan looks like to the controller: a Run row
(`running`) with its Task row (`running`, the plan the real planner made: coordinator, one
extra worker, a merge), and in the run store the local backend's files for it — the launch,
the workflow's index entry, and a running attempt of the coordinator and of the extra worker
whose supervisor and pod are one long-sleeping process this benchmark starts (so the backend
sees live pods, starts nothing and kills nothing), the merge waiting. The rows are cloned from
one run made by the real `create_run`.

The backend is the service's (`runs.backends.backend()`), subscribed as the watcher subscribes
it, so its loop passes over every live run in a thread of this process while the ticks are
timed, as in the watcher. A tick is `runs.controller.tick.tick(backend)` — what the watcher and
Celery beat run. Per size, after the runs' files have aged past the local backend's racy window
(`cluster.local.statuses.RACY_S`, as a live run's files do between its changes):

- a tick of a process that has noted nothing, which derives every run and writes the new ones
  (the tick where every run changed); then, after one whole pass of the loop,
- the first tick of a restarted process (a new `Seen`): every run derived, none changed;
- `--ticks` ticks timed one by one (median): the steady state, where nothing changed.

The queries of each tick are counted with `CaptureQueriesContext`; the time is split into the
backend's `statuses()`, the runs derived (`reconcile_with`) and the rest.

With `--argo`, the same sizes are then measured on the Argo backend on the cluster simulator
(`bench/argo/reconcile_tick.py --runs <sizes> --pods-per-run 4`, in a process of its own).

    python bench/local/reconcile_tick.py [--sizes 10 100 1000] [--ticks 7] [--argo] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _live_runs import create_live_runs, remove_runs, rewrite_records, run_states, template_run
from _stack import stack, wait_for

SLEEPER = [sys.executable, "-c", "import time; time.sleep(3600)"]


class Timer:
    """Accumulated seconds and calls of a wrapped function."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.each: list[float] = []

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.each.append(time.perf_counter() - started)
                self.seconds += self.each[-1]
                self.calls += 1

        return timed


def measure_tick(backend: Any, seen: Any, *, profile: bool = False) -> dict[str, float]:
    """One controller tick, timed in parts, with its queries counted."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runs.controller import tick as tick_module

    statuses, derive, writes = Timer(), Timer(), Timer()
    original_derive, original_write = tick_module.derive, tick_module.write_if_unchanged
    backend.statuses = statuses.wrap(backend.statuses)
    tick_module.derive = derive.wrap(original_derive)
    tick_module.write_if_unchanged = writes.wrap(original_write)
    reads = backend._statuses.reads
    connection.queries_log.clear()
    load = os.getloadavg()[0]
    profiler = cProfile.Profile(time.thread_time) if profile else None  # CPU, not waits
    try:
        with CaptureQueriesContext(connection) as queries:
            started, cpu = time.perf_counter(), time.thread_time()
            if profiler is not None:
                profiler.enable()
            runs = tick_module.tick(backend, seen=seen)
            total, cpu = time.perf_counter() - started, time.thread_time() - cpu
    finally:
        if profiler is not None:
            profiler.disable()
            stats = pstats.Stats(profiler)
            if os.environ.get("BENCH_PROFILE_OUT"):  # for a viewer (snakeviz, pstats)
                stats.dump_stats(os.environ["BENCH_PROFILE_OUT"])
            stats.sort_stats("cumulative").print_stats(45)
            stats.sort_stats("tottime").print_stats(25)
        tick_module.derive, tick_module.write_if_unchanged = original_derive, original_write
        del backend.statuses
    kinds = Counter(_kind(q["sql"]) for q in queries.captured_queries)
    return {
        "runs": runs,
        "total": total,
        "cpu": cpu,  # of the tick's thread: not the loop's, which passes beside it
        "statuses": statuses.seconds,
        "derived": derive.calls,
        "derive": derive.seconds,
        "write": writes.seconds,
        "status_reads": backend._statuses.reads - reads,
        "database": sum(float(q["time"]) for q in queries.captured_queries),
        "queries": len(queries.captured_queries),
        "load": load,
        **{f"q: {kind}": float(n) for kind, n in sorted(kinds.items())},
    }


def _kind(sql: str) -> str:
    """A query's statement and first table: `SELECT runs_run`, `BEGIN` ..."""
    words = sql.split()
    table = next((w.strip('"') for w in words if w.startswith('"runs_')), "")
    return f"{words[0]} {table.split('.')[0].strip(chr(34))}".strip()


def wait_for_passes(passes: Timer, count: int, backend: Any) -> None:
    """Wait until the loop has made `count` more passes, ringing its doorbell before each (as a
    pod's end or a submission does): unrung, a loop whose passes are long waits four times a
    pass between them (`cluster.local.loop.idle_wait`), minutes at 10,000 runs."""
    from cluster.local.doorbell import BELL_FILE, ring

    for _ in range(count):
        until = len(passes.each) + 1
        ring(backend.state / BELL_FILE)
        wait_for(
            lambda until=until: len(passes.each) >= until,
            timeout=600,
            what="the loop's pass",
            every=0.05,
        )


def median_of(samples: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for s in samples for k in s}
    return {k: statistics.median(s.get(k, 0.0) for s in samples) for k in sorted(keys)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--ticks", type=int, default=7, help="timed steady ticks per size")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--profile", action="store_true", help="profile the first tick")
    parser.add_argument(
        "--profile-steady", action="store_true", help="profile the last steady tick"
    )
    parser.add_argument(
        "--changed",
        type=int,
        default=1,
        help="ticks where every run changed (the best is reported): the first derives the "
        "new runs, the others every run after another writer moved its record",
    )
    parser.add_argument(
        "--profile-changed", action="store_true", help="profile the tick writing the new runs"
    )
    parser.add_argument("--argo", action="store_true", help="then the same on the Argo backend")
    args = parser.parse_args()
    with stack(services=False):  # the tick runs in this process, as in the watcher
        from cluster.local.attempts import ProcessId
        from runs.backends import backend as the_backend

        sleeper_proc = subprocess.Popen(SLEEPER, start_new_session=True)
        backend = the_backend()
        passes = Timer()
        backend._loop._pass = passes.wrap(backend._loop._pass)  # the loop's passes, timed
        backend.subscribe(lambda: None)  # the watcher's subscription: the loop runs
        try:
            results = run_sizes(args, ProcessId.of(sleeper_proc.pid), backend, passes)
        finally:
            backend.close()
            os.killpg(sleeper_proc.pid, signal.SIGKILL)
            sleeper_proc.wait()
    report(args, results)
    if args.argo:
        argo = Path(__file__).resolve().parents[1] / "argo" / "reconcile_tick.py"
        sizes = [str(size) for size in args.sizes]
        command = [sys.executable, str(argo), "--runs", *sizes, "--pods-per-run", "4"]
        subprocess.run(command, check=True)


def run_sizes(
    args: argparse.Namespace, sleeper: Any, backend: Any, passes: Timer
) -> dict[int, dict[str, Any]]:
    """Per size: the first tick (every run derived), then the steady ticks."""
    from cluster.local.statuses import RACY_S
    from runs.controller.seen import Seen

    template = template_run()
    results: dict[int, dict[str, Any]] = {}
    live: list[str] = []
    process = Seen()  # the process before the restarts: it ticks once per size
    for size in sorted(args.sizes):
        live += create_live_runs(template, size - len(live), sleeper)
        time.sleep(RACY_S + 0.5)  # the files age past the racy window, as a live run's do
        wait_for_passes(passes, 2, backend)  # the loop saw the new runs, as it sees a change first
        passed = len(passes.each)
        # the process that ran so far sees the new runs: derives and writes them
        before = measure_tick(backend, process, profile=args.profile_changed)
        again = [before]
        for _ in range(args.changed - 1):  # every record moved by another writer: derived again
            rewrite_records(live)
            wait_for_passes(passes, 2, backend)  # the loop read them after the write, as it would
            again.append(measure_tick(backend, process))
        before = min(again, key=lambda t: t["total"])
        wait_for_passes(passes, 2, backend)  # a whole pass after the records were written
        seen = Seen()  # the process restarted: it has noted nothing
        first = measure_tick(backend, seen, profile=args.profile)
        steady = [measure_tick(backend, seen) for _ in range(args.ticks - 1)]
        steady.append(measure_tick(backend, seen, profile=args.profile_steady))
        print(f"{size:5d} runs: their states {run_states()}", flush=True)
        loop_pass = statistics.median(passes.each[passed:] or passes.each[-1:] or [0.0])
        tick = median_of(steady)
        results[size] = {"before": before, "first": first, "tick": tick, "loop_pass_s": loop_pass}
        print(
            f"{size:5d} runs: tick {tick['total'] * 1000:.1f} ms (median of {args.ticks}; "
            f"CPU {tick['cpu'] * 1000:.1f} ms; "
            f"statuses() {tick['statuses'] * 1000:.1f} ms, {tick['derived']:.0f} runs derived, "
            f"{tick['status_reads']:.0f} statuses read from files, {tick['queries']:.0f} queries, "
            f"load {tick['load']:.2f}); first tick after a restart {first['total'] * 1000:.0f} ms "
            f"(CPU {first['cpu'] * 1000:.0f} ms; {first['derived']:.0f} derived, "
            f"{first['status_reads']:.0f} read from files, "
            f"{first['queries']:.0f} queries); the tick writing the new runs "
            f"{before['total'] * 1000:.0f} ms (CPU {before['cpu'] * 1000:.0f} ms; "
            f"statuses() {before['statuses'] * 1000:.0f} ms, {before['derived']:.0f} derived "
            f"in {before['derive'] * 1000:.0f} ms, written in {before['write'] * 1000:.0f} ms, "
            f"the database {before['database'] * 1000:.0f} ms, {before['queries']:.0f} "
            f"queries); the loop's pass {loop_pass * 1000:.0f} ms",
            flush=True,
        )
    backend.close()  # the loop stops before the runs' files go
    remove_runs(live)
    return results


def report(args: argparse.Namespace, results: dict[int, dict[str, Any]]) -> None:
    sizes = sorted(results)
    small, large = sizes[0], sizes[-1]
    a, b = results[small]["tick"], results[large]["tick"]
    fa, fb = results[small]["first"], results[large]["first"]
    print(
        f"\ntick with {large} live runs ÷ with {small}: {b['total'] / a['total']:.1f}x "
        f"(goal ≤ 15x): {a['total'] * 1000:.1f} ms → {b['total'] * 1000:.1f} ms; queries "
        f"{a['queries']:.0f} → {b['queries']:.0f}"
    )
    print(
        f"first tick after a restart (nothing changed): "
        f"{fb['total'] / fa['total']:.1f}x (goal ≤ 10x; {fa['total'] * 1000:.0f} ms → "
        f"{fb['total'] * 1000:.0f} ms, goal ≤ 1 s at 1,000); queries "
        f"{fa['queries']:.0f} → {fb['queries']:.0f}"
    )
    ba, bb = results[small]["before"], results[large]["before"]
    print(
        f"a tick where every run changed (the new runs derived and written): "
        f"{ba['total'] * 1000:.0f} ms → {bb['total'] * 1000:.0f} ms; queries "
        f"{ba['queries']:.0f} → {bb['queries']:.0f}"
    )
    for size in sizes:
        t = results[size]["tick"]
        print(
            f"  {size:5d} runs: steady tick {t['total'] * 1000:7.1f} ms, of which statuses() "
            f"{t['statuses'] * 1000:.1f} ms and the database {t['database'] * 1000:.1f} ms; "
            + ", ".join(f"{k[3:]} {t[k]:.0f}" for k in sorted(t) if k.startswith("q: "))
        )
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

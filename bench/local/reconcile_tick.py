"""Benchmark: one reconcile tick with 1,000 live runs ÷ with 10, on the local backend.

Each live run is what a running split scan looks like to the controller: a Run row
(`running`) with its Task row (`running`, the plan the real planner made: coordinator, one
extra worker, a merge), and in the run store the local backend's files for it — the launch,
the workflow's index entry, and a running attempt of the coordinator and of the extra worker
whose supervisor and pod are one long-sleeping process this benchmark starts (so the backend
sees live pods, starts nothing and kills nothing), the merge waiting. The rows are cloned from
one run made by the real `create_run`.

A tick is `runs.controller.tick.tick(backend)` — exactly what the watcher and Celery beat run
— with the real `LocalBackend`, after one warm-up tick (the first writes every run's pods).
The queries of each tick are counted with `CaptureQueriesContext`; the time of a tick is split
into the backend's `status()` (and within it the backend's own `tick()`, which `status()`
calls), the controller's `observe()`, the database, and the rest.

A tick over N runs makes N `status()` calls; if each of those makes a pass over all N runs the
tick grows as N². A full tick is measured at every size whose predicted time (from the sizes
before it) fits `--budget` seconds; a larger size is measured by its parts: one backend pass
over all its runs, timed directly, and a full tick with `status()` answered from the files
without that pass; the full tick is then their composition, reported as such, next to the
real `reconcile_run` of a few of its runs (each making its pass) as a check.

    python bench/local/reconcile_tick.py [--sizes 10 30 100 1000] [--ticks 5] [--budget 20]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from _stack import stack

SLEEPER = [sys.executable, "-c", "import time; time.sleep(3600)"]


class Timer:
    """Accumulated seconds and calls of a wrapped function."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1

        return timed


@dataclass(frozen=True)
class Template:
    """What the live runs are cloned from: one run as the real submission made it."""

    run: dict[str, Any]
    task: dict[str, Any]
    launch: Any


def template_run() -> Template:
    """One run made by the real submission path (its Celery message goes to a dead queue),
    kept as plain values; the run itself is deleted, so only the clones are live."""
    from runs.backends import backend
    from runs.services.identities import create_identity
    from runs.services.submission import create_run, run_launch

    identity = create_identity(name="bench", kind="person", password="bench-pw-123")
    task = {"id": "scan", "type": "spin", "settings": {"units": 200, "seconds": 0.01}, "split": 2}
    run = create_run(
        identity=identity,
        workflow={"name": "tick", "tasks": [task]},
        sources=[],
        nodes=backend().nodes(),
    )
    row = run.tasks.get()
    template = Template(
        run={
            "name": run.name,
            "owner": run.owner,
            "principal": run.principal,
            "tier": run.tier,
            "workflow": run.workflow,
        },
        task={
            k: getattr(row, k)
            for k in ("task_id", "type", "splittable", "settings", "resources", "plan")
        }
        | {"units_total": row.units_total},
        launch=run_launch(run, environment="service"),
    )
    run.delete()
    return template


def create_live_runs(template: Template, count: int, sleeper: Any) -> list[str]:
    """`count` running runs like `template`, in the database and in the backend's files."""
    from django.utils import timezone

    from cluster.local.atomic_files import create_json, write_json
    from cluster.local.attempts import ATTEMPT_FILE, CHILD_FILE, SUPERVISOR_FILE
    from cluster.local.run_files import RunFiles
    from runs.models import Run, Task
    from runs.models.run import new_run_id
    from runs.store import store

    now = timezone.now()
    launch = template.launch
    ids: set[str] = set()
    while len(ids) < count:
        ids.add(new_run_id())
    runs = [
        Run(
            id=run_id,
            **template.run,
            workflow_name=f"simrun-{run_id}",
            state="running",
            environment={"ref": "service"},
            submitted_at=now,
            started_at=now,
        )
        for run_id in sorted(ids)
    ]
    Run.objects.bulk_create(runs)
    Task.objects.bulk_create(
        Task(run=run, position=0, state="running", started_at=now, **template.task) for run in runs
    )
    state = store().root / "local"
    shape = template.task["plan"]["shape"]
    for run in runs:
        files = RunFiles(store().run(run.id))
        files.create(_replace(launch, run_id=run.id, workflow_name=run.workflow_name))
        create_json(state / "workflows" / f"{run.workflow_name}.json", {"run_id": run.id})
        store().run(run.id).task("scan").root.mkdir(parents=True, exist_ok=True)
        for pod in ("scan-w0", "scan-w1"):
            folder = files.pods / pod / "0"
            spec = {
                "attempt": 0,
                "args": ["simrun-worker"],
                "env": {},
                "cwd": str(folder),
                "cores": shape["cores"],
                "memory_limit_gb": shape["memory_gb"],
                "kill_after_s": 60,
                "poll_s": 0.1,
                "created": time.time(),
            }
            write_json(folder / ATTEMPT_FILE, spec)
            write_json(folder / SUPERVISOR_FILE, sleeper.to_json())
            write_json(folder / CHILD_FILE, sleeper.to_json())
    return [run.id for run in runs]


def _replace(launch: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(launch, **changes)


def remove_runs(ids: list[str]) -> None:
    import shutil

    from runs.models import Run
    from runs.store import store

    Run.objects.filter(pk__in=ids).delete()
    for run_id in ids:
        name = f"simrun-{run_id}"
        (store().root / "local" / "workflows" / f"{name}.json").unlink(missing_ok=True)
        shutil.rmtree(store().run(run_id).root, ignore_errors=True)


def measure_tick(backend: Any, *, skip_inner_tick: bool = False) -> dict[str, float]:
    """One controller tick, timed in parts, with its queries counted."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runs.controller import reconcile
    from runs.controller.tick import tick

    status, inner, observe = Timer(), Timer(), Timer()
    original_observe = reconcile.observe
    original_status, original_tick = backend.status, backend.tick
    backend.tick = (lambda: False) if skip_inner_tick else inner.wrap(original_tick)
    backend.status = status.wrap(original_status)
    reconcile.observe = observe.wrap(original_observe)
    connection.queries_log.clear()  # it keeps 9,000 queries; a tick at 1,000 runs makes 5,000
    try:
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            runs = tick(backend)
            total = time.perf_counter() - started
    finally:
        reconcile.observe = original_observe
        del backend.status, backend.tick
    database = sum(float(q["time"]) for q in queries.captured_queries)
    kinds = Counter(_kind(q["sql"]) for q in queries.captured_queries)
    return {
        "runs": runs,
        "total": total,
        "status": status.seconds,
        "backend_tick": inner.seconds,
        "status_calls": status.calls,
        "observe": observe.seconds,
        "database": database,
        "rest": total - status.seconds - observe.seconds - database,
        "queries": len(queries.captured_queries),
        "updates": kinds.get("UPDATE runs_run", 0),
        **{f"q: {kind}": float(n) for kind, n in sorted(kinds.items())},
    }


def _kind(sql: str) -> str:
    """A query's statement and first table: `SELECT runs_task`, `BEGIN` ..."""
    words = sql.split()
    table = next((w.strip('"') for w in words if w.startswith('"runs_')), "")
    return f"{words[0]} {table.split('.')[0].strip(chr(34))}".strip()


def sample_runs(backend: Any, count: int = 5) -> float:
    """Seconds of the real `reconcile_run` (its `status()` making its pass) of a few runs."""
    from runs.controller.reconcile import followed_runs, reconcile_run

    times = []
    for run in followed_runs()[:count]:
        started = time.perf_counter()
        reconcile_run(run, backend)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def median_of(samples: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for s in samples for k in s}
    return {k: statistics.median(s.get(k, 0.0) for s in samples) for k in sorted(keys)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 30, 100, 1000])
    parser.add_argument("--ticks", type=int, default=5, help="timed full ticks per size")
    parser.add_argument(
        "--budget", type=float, default=20.0, help="longest predicted full tick to measure (s)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with stack(services=False):  # the tick runs in this process: no worker, no watcher
        from cluster.local.attempts import ProcessId
        from runs.backends import backend as the_backend

        sleeper_proc = subprocess.Popen(SLEEPER, start_new_session=True)
        try:
            results = run_sizes(args, ProcessId.of(sleeper_proc.pid), the_backend())
        finally:
            os.killpg(sleeper_proc.pid, signal.SIGKILL)
            sleeper_proc.wait()
    report(args, results)


def run_sizes(args: argparse.Namespace, sleeper: Any, backend: Any) -> dict[int, dict[str, Any]]:
    """Per size: one backend pass, a tick without the passes, and the full tick."""
    template = template_run()
    results: dict[int, dict[str, Any]] = {}
    live: list[str] = []
    for size in sorted(args.sizes):
        live += create_live_runs(template, size - len(live), sleeper)
        repeats = args.ticks if size <= 100 else 3
        measure_tick(backend, skip_inner_tick=True)  # warm-up: the first tick writes the pods
        passes = []
        for _ in range(3):
            started = time.perf_counter()
            backend.tick()
            passes.append(time.perf_counter() - started)
        backend_pass = statistics.median(passes)
        without = median_of([measure_tick(backend, skip_inner_tick=True) for _ in range(repeats)])
        composed = dict(without)
        composed["backend_tick"] = backend_pass * size
        composed["status"] = without["status"] + composed["backend_tick"]
        composed["total"] = without["total"] + composed["backend_tick"]
        entry: dict[str, Any] = {"backend_pass_s": backend_pass, "without_passes": without}
        entry["composed"] = composed
        if composed["total"] <= args.budget:
            entry.update(
                kind="measured", tick=median_of([measure_tick(backend) for _ in range(repeats)])
            )
        else:
            entry.update(kind="composed", tick=composed, sampled_run_s=sample_runs(backend))
        results[size] = entry
        if "sampled_run_s" in entry:
            print(
                f"{size:5d} runs: the real reconcile of one run (status() with its pass, observe, "
                f"write) takes {entry['sampled_run_s']:.3f} s (median of 5); composed: "
                f"{composed['total'] / size:.3f} s per run"
            )
        t = entry["tick"]
        print(
            f"{size:5d} runs: tick {t['total']:.3f} s ({entry['kind']}; composed "
            f"{composed['total']:.3f}) — status() {t['status']:.3f} of which backend passes "
            f"{t['backend_tick']:.3f}, observe {t['observe']:.3f}, database {t['database']:.3f}, "
            f"rest {t['rest']:.3f}; without the passes {without['total']:.3f} s; one backend "
            f"pass {backend_pass:.3f} s; {t['queries']:.0f} queries",
            flush=True,
        )
    remove_runs(live)
    return results


def report(args: argparse.Namespace, results: dict[int, dict[str, Any]]) -> None:
    sizes = sorted(results)
    small, large = sizes[0], sizes[-1]
    a, b = results[small]["tick"], results[large]["tick"]
    wa, wb = results[small]["without_passes"], results[large]["without_passes"]
    print(
        f"\ntick with {large} live runs ÷ with {small}: {b['total'] / a['total']:.0f}x "
        f"(goal ≤ 15x): {a['total']:.3f} s ({results[small]['kind']}) → {b['total']:.1f} s "
        f"({results[large]['kind']})"
    )
    print(
        f"the same tick if status() made no backend pass: {wb['total'] / wa['total']:.0f}x "
        f"({wa['total']:.3f} s → {wb['total']:.2f} s)"
    )
    print(
        f"one backend pass over every live run: {results[small]['backend_pass_s'] * 1000:.1f} ms "
        f"at {small}, {results[large]['backend_pass_s'] * 1000:.0f} ms at {large}; status() "
        "makes one per run"
    )
    print(
        f"queries per run: {a['queries'] / small:.2f} at {small}, {b['queries'] / large:.2f} at "
        f"{large}; per extra run: {(b['queries'] - a['queries']) / (large - small):.2f}"
    )
    kinds = sorted(k for k in b if k.startswith("q: "))
    print(
        f"queries of a tick at {large} runs, per run: "
        + ", ".join(f"{k[3:]} {b[k] / large:.2f}" for k in kinds)
    )
    for size in sizes:
        t, w = results[size]["tick"], results[size]["without_passes"]
        print(
            f"  {size:5d} runs: {t['total'] / size * 1000:7.1f} ms per run "
            f"({w['total'] / size * 1000:.1f} without the passes; database "
            f"{w['database'] / size * 1000:.1f}, status() from files "
            f"{w['status'] / size * 1000:.1f})"
        )
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

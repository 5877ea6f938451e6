"""Benchmark: the first view of a large split task in a web process that never read it, with
the summary another process saved of its progress lines ÷ without one.

A run of one `spin` task of `--units` units is created by the real submission path (its
Celery message goes to a dead queue) and given a progress file of one `unit_done` line a
unit, written by the harness's own `ProgressWriter` from two workers, as a finished scan
leaves it. Each view is a fresh process (`--child`): Django set up and the list of runs
rendered (a web process up for a while, its code imported), then the run's page rendered
once through Django's test client and timed, or the task's progress lines read
(`unit_lines`, part of the page) timed alone. Without: the view cache emptied first, so the
process reads every line (and saves what it read); with: the process before it saved it.
The two alternate `--repeats` times; medians, and their ratio.

    python bench/local/first_view.py [--units 100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _stack import stack


def child(run_id: str, what: str) -> None:
    """One first view in this fresh process, timed: its page (`page`) or only the task's
    progress lines read (`lines`), as one JSON line."""
    import django

    django.setup()
    from django.test import Client

    from runs.models import Run
    from runs.selectors import progress_lines

    run = Run.objects.get(pk=run_id)
    client = Client()
    client.force_login(run.owner.user)
    task = run.tasks.get()
    warm_up = client.get("/")  # a web process up for a while: its code imported
    assert warm_up.status_code == 200, warm_up.status_code
    profile = cProfile.Profile() if os.environ.get("BENCH_PROFILE") else None
    started = time.perf_counter()
    if profile:
        profile.enable()
    if what == "lines":
        progress_lines.unit_lines(task)
    else:
        answer = client.get(f"/runs/{run_id}/")
        assert answer.status_code == 200, answer.status_code
    took = (time.perf_counter() - started) * 1000
    if profile:
        profile.disable()
        pstats.Stats(profile, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
    print(json.dumps({"ms": took}))


def a_finished_scan(units: int) -> str:
    """A run of one split task whose progress file says all its units were done."""
    from runs.backends import backend
    from runs.services.identities import create_identity
    from runs.services.submission import create_run
    from runs.store import task_paths
    from simrun_harness.ledger import unit_names
    from simrun_harness.progress import ProgressWriter

    identity = create_identity(name="bench", kind="person", password="bench-pw-123")
    task = {"id": "scan", "type": "spin", "settings": {"units": units, "seconds": 0.001}}
    run, _ = create_run(
        identity=identity,
        workflow={"name": "first-view", "tasks": [task | {"split": 2}]},
        sources=[],
        nodes=backend().nodes(),
    )
    paths = task_paths(run.pk, "scan")
    paths.root.mkdir(parents=True, exist_ok=True)
    writers = [ProgressWriter(paths.progress, f"scan-w{i}") for i in (0, 1)]
    for index, name in enumerate(unit_names(units)):
        writers[index % 2].unit_done(name, 0.001 + (index % 7) / 1000, 0.02)
        if index % 1000 == 999:
            writers[index % 2].flush()
    for writer in writers:
        writer.close()
    return str(run.pk)


def view(run_id: str, what: str) -> float:
    here = Path(__file__).resolve()
    answer = subprocess.run(
        [sys.executable, str(here), "--child", run_id, what],
        stdout=subprocess.PIPE,
        stderr=None if os.environ.get("BENCH_PROFILE") else subprocess.PIPE,
        text=True,
        check=True,
        env=os.environ,
    )
    result: float = json.loads(answer.stdout.strip().splitlines()[-1])["ms"]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("RUN_ID", "WHAT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    with stack(services=False) as the_stack:
        from django.conf import settings

        run_id = a_finished_scan(args.units)
        cache = Path(settings.SIMRUN_VIEW_CACHE)
        progress = next((the_stack.tmp / "store").rglob("progress*"))
        print(
            f"a run of {args.units:,} units; its progress file {progress.stat().st_size / 1e6:.1f}"
            f" MB; load {os.getloadavg()[0]:.1f}"
        )
        for name, what in (("progress lines read", "lines"), ("the run's page", "page")):
            cold, warm = [], []
            for _ in range(args.repeats):
                shutil.rmtree(cache, ignore_errors=True)
                cold.append(view(run_id, what))  # reads every line, and saves what it read
                warm.append(view(run_id, what))
            without, with_saved = statistics.median(cold), statistics.median(warm)
            print(
                f"  {name}: without a saved summary {without:.0f} ms, with {with_saved:.0f} ms "
                f"(ratio {with_saved / without:.3f}; medians of {args.repeats})"
            )
        print(f"  load at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: a 2,000-unit scan through simrun ÷ the same units on a bare multiprocessing.Pool.

The `spin` type (each unit burns a fixed CPU time) split `auto` over the local node's cores
(SIMRUN_LOCAL_CORES=2), submitted with `create_run` to a real Celery worker and watcher on a
throwaway database; its wall time runs from the `create_run` call to the run's `ended_at`
(the watcher's record that it succeeded). The baseline is `multiprocessing.Pool(cores)`
mapping `simrun_examples.testing.spin` over the same units in a fresh process
(`_bare_pool.py`). The two alternate `--repeats` times; medians are reported. Goal ≤ 1.1
(≤ 1.05 for units of 0.1 s or more: `--units 200 --seconds 0.1`).

Where simrun's time goes, from the files the run leaves (`_timeline.py`):

    submit          create_run called → the coordinator's attempt created by the backend
    launch          → the coordinator's pod process started (its supervisor's start)
    worker start    → its log says the ledger is created (imports, units, ledger)
    first unit      → the first unit done (pool started, one unit)
    units           first → last unit done

then, as the planner chooses for one pod, the coordinator merging:

    type's merge    → the merge marker written (the task type's merge of every unit in a
                    pool process, then the output published)
    coord. exit     → the coordinator's exit recorded
    reconcile       → the run's ended_at written by the watcher

or, with `--merge-pod`, a merge pod of its own:

    coord. exit     last unit → the coordinator's exit recorded
    merge start     → the merge pod's attempt created (the backend's next pass)
    merge launch    → the merge pod's process started
    merge start-up  → its log says it is merging (imports, checking every unit is done)
    type's merge    → the merge marker written
    merge exit      → the merge's exit recorded
    reconcile       → the run's ended_at written by the watcher

and the CPU seconds each part of the stack used meanwhile (`_cpu.py`; the worker pod's main
process and its units from its report, which counts them exactly), next to the CPU the
rest of the machine used (other users of the shared cores, this script's own sampling and
polling among them). Since those others come and go,
each wall time is also reported corrected for them: the wall time less their CPU seconds over
the cores, what it would have been had they left the cores alone (exact for CPU-bound work;
for the waits in simrun's phases it flatters simrun slightly).

    python bench/local/scan.py [--units 2000] [--seconds 0.01] [--repeats 3] [--merge-pod] [--json]
    python bench/local/scan.py --units 100000 --seconds 0.001 --repeats 1

By default the stack is the embedded default (`simrun serve` in a fresh data directory:
SQLite, the file broker; `_embedded.py`); `--stack postgres` runs a Celery worker and the
watcher on Postgres and Redis instead (`_stack.py`), as the figures before this option did.
After the last repeat it prints what a large scan costs besides its time
(`_scan_measures.py`): the services' peak resident memory, the store's bytes per unit, and
the time each of the run's API views (over HTTP) and its page take to answer, the output
listing among them.

The store is a temporary directory (`TMPDIR`, else /tmp). Each unit of simrun makes a
directory there, which the bare pool does not: its cost is printed (`directory_cost`), since
on this VM it ranges from ~40 µs to ~500 µs a directory with what was deleted nearby lately.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from _cpu import PARTS, CpuSampler
from _embedded import embedded
from _scan_measures import api_times_ms, page_time_ms, peak_rss_mb, store_bytes
from _stack import stack

HERE = Path(__file__).resolve().parent
CORES = 2
PHASES = (  # with a merge pod (`--merge-pod`)
    "submit",
    "launch",
    "worker start",
    "first unit",
    "units",
    "coord. exit",
    "merge start",
    "merge launch",
    "merge start-up",
    "type's merge",
    "merge exit",
    "reconcile",
)
SELF_MERGING_PHASES = (  # the planner's choice for one pod: the coordinator merges
    "submit",
    "launch",
    "worker start",
    "first unit",
    "units",
    "type's merge",
    "coord. exit",
    "reconcile",
)


def _busy() -> float:
    """CPU seconds the whole machine has been busy (every core, every user)."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + t.irq + t.softirq + getattr(t, "steal", 0.0)


def directory_cost(store: Path, count: int = 200) -> float:
    """Microseconds (CPU) to make a unit's directory in the store and rename it into place,
    as a pool process does for every unit (the bare pool makes none). It varies with the
    file system's state: ext4 without a journal (this VM's) skips every inode freed in the
    last minute or more at each allocation, so where many files were just deleted (/tmp on
    a shared machine) one directory can cost ten times what it costs elsewhere. The probe
    deletes nothing, so it does not add to that."""
    probe = Path(tempfile.mkdtemp(prefix=".probe-", dir=store))
    start = time.process_time()
    for i in range(count):
        os.mkdir(probe / f".d{i}")
        os.rename(probe / f".d{i}", probe / f"d{i}")
    return (time.process_time() - start) / count * 1e6


def bare(units: int, seconds: float) -> dict[str, float]:
    """The baseline in a fresh process: its pool's wall time and the CPU it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy = _busy()
    out = subprocess.run(
        [sys.executable, str(HERE / "_bare_pool.py"), str(units), str(seconds), str(CORES)],
        check=True,
        capture_output=True,
        text=True,
        # a session of its own, as every pod has: with the kernel's autogroups a session's
        # share of a busy machine's cores does not depend on how many processes it runs
        start_new_session=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    wall = float(json.loads(out)["wall_s"])
    return {"wall": wall, "cpu": cpu, "others_cpu": max(0.0, _busy() - busy - cpu)}


def through_simrun(
    the_stack: Any, identity: Any, units: int, seconds: float, merge_pod: bool = False
) -> dict[str, Any]:
    """One scan through simrun: wall time, phases, CPU per part."""
    from _timeline import (
        log_time,
        merge_marker_time,
        pod_times,
        submit,
        unit_done_times,
        wait_for_end,
    )

    from runs.models import Task
    from runs.store import store

    pids = the_stack.pids()
    sampler = CpuSampler(
        celery=pids["worker"],
        watcher=pids["watcher"],
        web=pids.get("web"),
        database=the_stack.database,
        store=str(the_stack.store),
        # the worker pod's CPU comes from its report: the samples in between only need to
        # see the supervisor and the services, and each takes the machine's cores from the
        # units (~3 ms a sample), which the bare pool's run does not pay
        every=2.0,
    ).start()
    busy = _busy()
    task: dict[str, object] = {
        "id": "scan",
        "type": "spin",
        "settings": {"units": units, "seconds": seconds},
    }
    if merge_pod:
        task["coordinator_merges"] = False
    run, called, _ = submit(identity, task, "scan")
    # polled once a second: the run's ended_at ends the wall time, and each poll's CPU (and
    # Postgres's) competes with the run, not with the bare pool
    ended, _ = wait_for_end(run.pk, timeout=900, every=1.0)
    cpu = sampler.stop(ended_at=ended.ended_at.timestamp() if ended.ended_at else None)
    machine = _busy() - busy
    if ended.state != "succeeded":
        raise SystemExit(f"run {run.pk} ended {ended.state}: {ended.message}")
    assert ended.ended_at is not None
    end = ended.ended_at.timestamp()
    plan = Task.objects.get(run=run, task_id="scan").plan
    w0 = pod_times(run.pk, "scan-w0")
    assert w0 and w0.started and w0.ended
    done = sorted(unit_done_times(run.pk, "scan"))
    marker = merge_marker_time(run.pk, "scan")
    ledger = log_time(run.pk, "scan-w0", "ledger created")
    assert len(done) == units and marker is not None, (len(done), marker)
    assert ledger is not None
    report = json.loads((store().run(run.pk).task("scan").reports / "scan-w0-0.json").read_text())
    # the worker pod's own count (its rusage): a sample every 0.5 s misses each process's
    # last moments, the whole units' part of them when the pool ends between two samples
    cpu["pod"] = report["main_cpu_seconds"]
    cpu["units"] = report["cpu_seconds"] - report["main_cpu_seconds"]
    marks = [called, w0.created, w0.started, ledger, done[0], done[-1]]
    names = SELF_MERGING_PHASES
    if plan["coordinator_merges"]:
        marks += [marker, w0.ended, end]
    else:
        merge = pod_times(run.pk, "scan-merge")
        merging = log_time(run.pk, "scan-merge", ": merging ")
        assert merge and merge.started and merge.ended and merging is not None
        marks += [w0.ended, merge.created, merge.started, merging, marker, merge.ended, end]
        names = PHASES
    phases = {name: b - a for name, a, b in zip(names, marks[:-1], marks[1:], strict=True)}
    return {
        "run_id": run.pk,
        "wall": end - called,
        "phases": phases,
        "cpu": cpu,
        # this script's own sampling and polling count as another user, as in `bare`
        "others_cpu": max(0.0, machine - sum(v for k, v in cpu.items() if k != "bench")),
        "pods": plan["pods"],
        "processes": plan["shape"]["processes"],
        "unit_seconds_median": report["unit_seconds"]["median"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--units", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=0.01, help="CPU seconds per unit")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print every figure as JSON too")
    parser.add_argument(
        "--merge-pod", action="store_true", help="merge in a pod of its own, not the coordinator"
    )
    parser.add_argument("--stack", choices=("embedded", "postgres"), default="embedded")
    args = parser.parse_args()
    bares: list[dict[str, float]] = []
    runs: list[dict[str, Any]] = []
    extras: dict[str, Any] = {}
    with embedded() if args.stack == "embedded" else stack(services=True) as the_stack:
        from runs.services.identities import create_identity

        identity = create_identity(name="bench", kind="person", password="bench-pw-123")
        through_simrun(the_stack, identity, 20, 0.001)  # warm-up: the worker's first submission
        for i in range(args.repeats):
            bares.append(bare(args.units, args.seconds))
            probe = directory_cost(the_stack.store)
            runs.append(
                through_simrun(the_stack, identity, args.units, args.seconds, args.merge_pod)
            )
            runs[-1]["directory_us"] = probe
            b, r = bares[-1], runs[-1]
            print(
                f"repeat {i + 1}: bare pool {b['wall']:.2f} s, simrun {r['wall']:.2f} s, "
                f"ratio {r['wall'] / b['wall']:.3f} (others used {b['others_cpu']:.1f} / "
                f"{r['others_cpu']:.1f} CPU s meanwhile)",
                flush=True,
            )
        extras = large_scan_costs(the_stack, identity, runs[-1], args.units)
    report(args, bares, runs)
    report_costs(extras)


def large_scan_costs(
    the_stack: Any, identity: Any, last: dict[str, Any], units: int
) -> dict[str, Any]:
    """What the last run costs besides its time: peak memory of the services, the store's
    bytes per unit, and how long its views take (the API over HTTP, if the stack serves it)."""
    from runs.services.identities import create_token
    from runs.store import store

    run_dir = store().run(last["run_id"]).root
    allocated, entries = store_bytes(run_dir)
    found: dict[str, Any] = {
        "units": units,
        "peak_rss_mb": peak_rss_mb(the_stack.pids()),
        "store_bytes_per_unit": allocated / units,
        "store_entries_per_unit": entries / units,
        "page_ms": page_time_ms(identity.user, last["run_id"]),
    }
    if getattr(the_stack, "url", None):
        secret = create_token(identity=identity, label="bench").secret
        found["api_ms"] = api_times_ms(the_stack.url, secret, last["run_id"])
    return found


def report_costs(extras: dict[str, Any]) -> None:
    if not extras:
        return
    print(f"  what the last run of {extras['units']} units costs besides its time:")
    rss = ", ".join(f"{k} {v:.0f} MB" for k, v in sorted(extras["peak_rss_mb"].items()))
    print(f"    services' peak resident memory (VmHWM, their processes summed): {rss}")
    print(
        f"    the run's store: {extras['store_bytes_per_unit']:.0f} bytes a unit "
        f"({extras['store_entries_per_unit']:.2f} files and directories a unit)"
    )
    first, median = extras["page_ms"]
    print(f"    the run's page: first {first:.0f} ms, median of 5 {median:.0f} ms (this process)")
    for route, (first, median) in extras.get("api_ms", {}).items():
        print(f"    GET {route}: first {first:.0f} ms, median of 5 {median:.0f} ms (over HTTP)")


def report(
    args: argparse.Namespace, bares: list[dict[str, float]], runs: list[dict[str, Any]]
) -> None:
    ideal = args.units * args.seconds / CORES
    bare_wall = statistics.median(b["wall"] for b in bares)
    simrun_wall = statistics.median(r["wall"] for r in runs)
    ratios = [r["wall"] / b["wall"] for b, r in zip(bares, runs, strict=True)]
    first = runs[0]
    print(
        f"\n{args.units} units x {args.seconds * 1000:g} ms CPU on {CORES} cores "
        f"(ideal {ideal:.1f} s); simrun planned {first['pods']} pod(s) x "
        f"{first['processes']} processes; medians of {args.repeats}:"
    )
    print(f"  bare multiprocessing.Pool({CORES}): {bare_wall:.2f} s")
    print(f"  simrun (create_run → ended_at): {simrun_wall:.2f} s")
    print(
        f"  ratio: {simrun_wall / bare_wall:.3f} (median of per-repeat ratios "
        f"{statistics.median(ratios):.3f}; goal ≤ {1.05 if args.seconds >= 0.1 else 1.1})"
    )
    bare_free = [b["wall"] - b["others_cpu"] / CORES for b in bares]
    simrun_free = [r["wall"] - r["others_cpu"] / CORES for r in runs]
    free_ratio = statistics.median(s / b for s, b in zip(simrun_free, bare_free, strict=True))
    print(
        "  corrected for the other users of the cores (wall - their CPU seconds / cores): "
        f"bare {statistics.median(bare_free):.2f} s, simrun {statistics.median(simrun_free):.2f} "
        f"s, ratio {free_ratio:.3f} (median of per-repeat ratios)"
    )
    units_phase = statistics.median(r["phases"]["units"] for r in runs)
    print(f"  units phase alone ÷ bare pool: {units_phase / bare_wall:.3f}")
    print("  where simrun's time goes (medians, s):")
    for name in first["phases"]:
        print(f"    {name:14s} {statistics.median(r['phases'][name] for r in runs):8.3f}")
    print(
        "  unit wall time in the pod (median of medians): "
        f"{statistics.median(r['unit_seconds_median'] for r in runs) * 1000:.1f} ms; a unit's "
        f"directory made and renamed in the store: "
        f"{statistics.median(r['directory_us'] for r in runs):.0f} µs CPU"
    )
    print("  CPU seconds per part during a simrun scan (medians):")
    for part in PARTS:
        print(f"    {part:10s} {statistics.median(r['cpu'][part] for r in runs):8.2f}")
    print(
        f"    (bare pool used {statistics.median(b['cpu'] for b in bares):.2f}; the rest of the "
        f"machine {statistics.median(r['others_cpu'] for r in runs):.1f} during simrun, "
        f"{statistics.median(b['others_cpu'] for b in bares):.1f} during the pool)"
    )
    work = statistics.median(
        (r["cpu"]["units"] + r["cpu"]["pod"] + r["cpu"]["supervisor"]) / b["cpu"]
        for b, r in zip(bares, runs, strict=True)
    )
    every = statistics.median(
        sum(v for k, v in r["cpu"].items() if k != "bench") / b["cpu"]
        for b, r in zip(bares, runs, strict=True)
    )
    print(
        f"  CPU of the worker pod (units + pod + supervisor) ÷ CPU of the bare pool: {work:.3f}; "
        f"of everything simrun ran ÷ the bare pool: {every:.3f}"
    )
    fixed = statistics.median(r["wall"] - r["phases"]["units"] for r in runs)
    print(f"  simrun's time outside the units phase: {fixed:.2f} s")
    if args.json:
        print(json.dumps({"bare": bares, "simrun": runs}, indent=1))


if __name__ == "__main__":
    main()

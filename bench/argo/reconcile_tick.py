"""Benchmark: the controller's tick on the Argo backend, on the cluster simulator, by live runs
and pods.

A template run is made by the real path (`create_run`, its launch submitted to the
`ArgoBackend` on a `tests.sim.SimCluster`) with Kueue and the scheduler paused, so its pods
wait and the simulated Argo gives its workflow the status a queued run has (a DAG, a Retry node
and a pod node per pod); a tick derives its record. Then the simulator's controllers are paused
and the template is cloned, in the database (its Run and Task rows) and in the simulator's
store (its Workflow object with the status, renamed), to the number of live runs asked; each
clone's row notes the revision of its workflow, as the process that derived it would have. What
is measured is the controller's side: the requests it makes (the simulator's access log), the list
pages it reads and parses, and its tick, in wall time and in CPU time of the tick's thread (the
simulated API server answers from a thread of the same process, so the wall time includes its
work).
Per size (`--pods`: live pods in all; `--pods-per-run`: the
shape of a run, 1 = a `command` task, k > 1 = a split task of k - 1 workers and a merge):

- the first tick of a restarted process (a new `Seen`; no run changed): one list of the
  workflows' metadata, every run noted from its row by its workflow's revision;
- `--ticks` steady ticks (median);
- the first tick of a restarted process after every workflow was written since its record
  was derived (the rows name no revision; the statuses are the same): every status read and
  compared with the digest its row notes.

    nice -n 10 python bench/argo/reconcile_tick.py [--pods 100 1000 5000] [--pods-per-run 1 10]
    nice -n 10 python bench/argo/reconcile_tick.py --runs 10 1000 --pods-per-run 4
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "local"))
from _stack import ROOT, stack, wait_for

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def template_run(backend: Any, sim: Any, pods_per_run: int) -> tuple[Any, dict[str, Any]]:
    """One queued run made and submitted by the real path; its record derived by a tick."""
    from runs.controller.seen import Seen
    from runs.controller.tick import tick
    from runs.services.identities import create_identity
    from runs.services.submission import create_run, run_launch

    identity = create_identity(name=f"bench{pods_per_run}", kind="person", password="bench-pw-1")
    if pods_per_run == 1:
        task: dict[str, Any] = {"id": "t", "type": "command", "settings": {"args": ["true"]}}
    else:
        settings = {"units": 1000, "seconds": 0.01}
        task = {"id": "scan", "type": "spin", "settings": settings, "split": pods_per_run - 1}
    run, _ = create_run(
        identity=identity,
        workflow={"name": "tick", "tasks": [task]},
        sources=[],
        nodes=backend.nodes(),
    )
    from runs.models import Run

    Run.objects.filter(pk=run.pk).update(state="queued", submitted_at=run.created_at)
    backend.submit(run_launch(run, environment="service"))
    workers = max(1, pods_per_run - 1)  # the merge's node appears once the coordinator ended
    wait_for(
        lambda: len(_pod_nodes(sim.workflow(run.workflow_name))) >= workers,
        timeout=120,
        what="the template's pod nodes",
        every=0.1,
    )
    tick(backend, seen=Seen())
    run = Run.objects.get(pk=run.pk)
    assert run.state == "queued" and len(run.pods) >= workers, (run.state, run.pods)
    return run, copy.deepcopy(sim.workflow(run.workflow_name))


def _pod_nodes(workflow: dict[str, Any] | None) -> list[str]:
    nodes = ((workflow or {}).get("status") or {}).get("nodes") or {}
    return [n for n, node in nodes.items() if node.get("type") == "Pod"]


def clone_runs(template: Any, workflow: dict[str, Any], count: int, sim: Any) -> list[str]:
    """`count` runs like the template: rows in the database, Workflows in the simulator."""
    from cluster.argo.manifest import RUN_LABEL
    from cluster.argo.names import label_value
    from runs.models import Run, Task
    from runs.models.run import new_run_id
    from tests.sim.resources import WORKFLOWS

    fields = [f.attname for f in Run._meta.concrete_fields if f.attname not in ("id",)]
    task_fields = [f.attname for f in Task._meta.concrete_fields if f.attname not in ("id",)]
    tasks = list(template.tasks.all())
    text = json.dumps(workflow)
    ids = [new_run_id() for _ in range(count)]
    runs = []
    for run_id in ids:
        values = {f: getattr(template, f) for f in fields}
        values |= {"workflow_name": f"simrun-{run_id}", "idempotency_key": None}
        runs.append(Run(id=run_id, **values))
    Run.objects.bulk_create(runs)
    Task.objects.bulk_create(
        Task(**({f: getattr(t, f) for f in task_fields} | {"run_id": r.id}))
        for r in runs
        for t in tasks
    )
    digest = template.derived_from.partition("@")[0]
    for run in runs:
        obj = json.loads(text.replace(template.workflow_name, run.workflow_name))
        meta = obj["metadata"]
        meta["labels"][RUN_LABEL] = label_value(run.id)
        for key in ("uid", "resourceVersion", "creationTimestamp"):
            meta.pop(key, None)
        made = sim.store.create(WORKFLOWS, sim.namespace, obj)
        # as the process before noted it, having derived the run from this revision
        run.derived_from = f"{digest}@{made['metadata']['resourceVersion']}"
    Run.objects.bulk_update(runs, ["derived_from"], batch_size=500)
    return ids


def written_since(ids: list[str]) -> dict[str, str]:
    """Make every run's row name no revision, as if its workflow was written after its
    record was derived (its status the same): a restarted process reads every status and
    compares its digest. What the rows said, to put back."""
    from runs.models import Run

    noted = dict(Run.objects.filter(pk__in=ids).values_list("pk", "derived_from"))
    runs = [Run(pk=pk, derived_from=text.partition("@")[0]) for pk, text in noted.items()]
    Run.objects.bulk_update(runs, ["derived_from"], batch_size=500)
    return noted


def measure(backend: Any, sim: Any, seen: Any, *, profile: bool = False) -> dict[str, float]:
    """One tick: its time, its `statuses()` time, its requests, the runs it derived; with
    `profile`, the profile of the tick's thread printed."""
    from runs.controller import tick as tick_module

    calls = {"statuses": 0.0, "derived": 0.0}
    statuses, derive = backend.statuses, tick_module.derive

    def timed_statuses(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return statuses(*args, **kwargs)
        finally:
            calls["statuses"] += time.perf_counter() - started

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls["derived"] += 1
        return derive(*args, **kwargs)

    backend.statuses, tick_module.derive = timed_statuses, counted
    before = len(sim.access_log)
    load = os.getloadavg()[0]
    profiler = cProfile.Profile() if profile else None
    try:
        started, cpu = time.perf_counter(), time.thread_time()
        if profiler is not None:
            profiler.enable()
        runs = tick_module.tick(backend, seen=seen)
        total, cpu = time.perf_counter() - started, time.thread_time() - cpu
    finally:
        if profiler is not None:
            profiler.disable()
            stats = pstats.Stats(profiler)
            stats.sort_stats("cumulative").print_stats(40)
            stats.sort_stats("tottime").print_stats(25)
        del backend.statuses
        tick_module.derive = derive
    return {
        "runs": runs,
        "total": total,
        "cpu": cpu,  # the tick's own thread: not the simulated API server's
        "requests": len(sim.access_log) - before,
        "load": load,
        **calls,
    }


def sizes_of(args: argparse.Namespace, pods_per_run: int) -> list[int]:
    """Live runs per size."""
    if args.runs:
        return sorted(args.runs)
    return sorted(max(1, pods // pods_per_run) for pods in args.pods)


def run_shape(args: argparse.Namespace, backend: Any, sim: Any, per: int) -> list[dict[str, Any]]:
    from runs.controller.seen import Seen
    from runs.models import Run
    from tests.sim.resources import WORKFLOWS

    sim.resume("argo")
    with sim.paused("kueue", "scheduler"):  # the pods stay pending
        template, workflow = template_run(backend, sim, per)
        sim.pause("argo", "scheduler", "kubelet", "jobs", "taints")
    size_b = len(json.dumps(workflow, separators=(",", ":")))
    nodes = len(_pod_nodes(workflow))
    print(f"{per} pods a run: the Workflow object is {size_b} bytes with {nodes} pod nodes")
    live = 1
    found = []
    ids = [template.pk]
    for size in sizes_of(args, per):
        ids += clone_runs(template, workflow, size - live, sim)
        live = size
        seen = Seen()
        largest = size == sizes_of(args, per)[-1]
        first = measure(backend, sim, seen, profile=args.profile and largest)
        steady = [measure(backend, sim, seen) for _ in range(args.ticks)]
        tick = {k: statistics.median(s[k] for s in steady) for k in steady[0]}
        noted = written_since(ids)
        changed = measure(backend, sim, Seen())
        Run.objects.bulk_update(
            [Run(pk=k, derived_from=v) for k, v in noted.items()], ["derived_from"]
        )
        row = {
            "pods_per_run": per,
            "runs": size,
            "pods": size * per,
            "first": first,
            "changed": changed,
            "tick": tick,
        }
        found.append(row)
        print(
            f"{per:3d} pods a run, {size:5d} runs ({size * per:5d} pods): first tick after a "
            f"restart {first['total'] * 1000:7.0f} ms (CPU {first['cpu'] * 1000:.0f} ms; "
            f"{first['derived']:.0f} derived, "
            f"statuses() {first['statuses'] * 1000:.0f} ms, {first['requests']:.0f} requests); "
            f"steady tick {tick['total'] * 1000:6.1f} ms (CPU {tick['cpu'] * 1000:.1f} ms; "
            f"statuses() "
            f"{tick['statuses'] * 1000:.1f} ms, {tick['requests']:.0f} requests); first tick "
            f"after a restart with every workflow written since its record "
            f"{changed['total'] * 1000:.0f} ms (CPU {changed['cpu'] * 1000:.0f} ms, "
            f"{changed['derived']:.0f} derived, {changed['requests']:.0f} requests); load "
            f"{first['load']:.1f}",
            flush=True,
        )
    for name in list(Run.objects.values_list("workflow_name", flat=True)):
        sim.store.remove(WORKFLOWS, sim.namespace, name)
    Run.objects.all().delete()
    return found


def report(rows: list[dict[str, Any]]) -> None:
    """Cost per run and per pod: the slope between the smallest and largest size of a shape."""
    print()
    for per in sorted({r["pods_per_run"] for r in rows}):
        mine = [r for r in rows if r["pods_per_run"] == per]
        small, large = mine[0], mine[-1]
        if large["runs"] == small["runs"]:
            continue
        for kind in ("first", "changed", "tick"):
            for what in ("total", "cpu"):
                dt = large[kind][what] - small[kind][what]
                runs = large["runs"] - small["runs"]
                print(
                    f"{per} pods a run, {kind:7s} {what:5s}: "
                    f"{large[kind][what] / small[kind][what]:.1f}x for "
                    f"{large['runs'] / small['runs']:.0f}x the runs; "
                    f"{dt / runs * 1e6:.0f} µs a run, {dt / (runs * per) * 1e6:.0f} µs a pod"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--runs", type=int, nargs="+", help="live runs per size (not --pods)")
    parser.add_argument("--pods-per-run", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--ticks", type=int, default=5, help="timed steady ticks per size")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--profile", action="store_true", help="profile the largest first tick")
    args = parser.parse_args()
    with stack(services=False) as the_stack:
        from cluster.argo.backend import ArgoBackend
        from tests.cluster.argo.lab import sim_config, start_sim

        workdir = Path(tempfile.mkdtemp(prefix="bench-argo-", dir=the_stack.tmp))
        sim = start_sim(workdir, the_stack.store)
        sim.store.strict = False  # the clones are the simulated Argo's own objects
        try:
            backend = ArgoBackend(sim_config(sim), sim.api_client())
            rows = [r for per in args.pods_per_run for r in run_shape(args, backend, sim, per)]
        finally:
            sim.stop()
    report(rows)
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

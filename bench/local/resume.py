"""Benchmark: a run cancelled half way and resumed ÷ a clean run of the same workflow.

One split task (`sleep` by default: units that wait, so other users of the shared cores
disturb the figure little; `--type spin` burns CPU instead) on the local node (two cores),
submitted with `create_run` to a real Celery worker and watcher on a throwaway database.
Each repeat, in this order (a task's key includes its settings: repeats share no units
only if their settings differ, so each repeat adds a unit to the task):

    cancelled   the workflow with reuse off, cancelled once half of its units are done
    resumed     the workflow with `resume_from` the cancelled run: its done units linked
                (only those: it is checked that it reused no other run's)
    clean       the workflow with reuse off: every unit computed (the baseline)

A run's wall time is from the `create_run` call to its `ended_at` (the watcher's record of
its end). The figure is resumed ÷ clean, both measured in the same repeat; goal ≤ 0.55. Also
reported: the fraction the cancelled run had done, the units the resumed run reused and
computed, and the units computed resumed ÷ clean (the work, without the fixed costs).

    python bench/local/resume.py [--units 600] [--seconds 0.2] [--type sleep] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from _stack import stack, wait_for


def _submit(identity: Any, task: dict[str, Any], **options: Any) -> tuple[Any, float]:
    from runs.backends import backend
    from runs.services.submission import create_run

    nodes = backend().nodes()
    called = time.time()
    run, _ = create_run(
        identity=identity,
        workflow={"name": "resume-bench", "tasks": [task]},
        sources=[],
        nodes=nodes,
        **options,
    )
    return run, called


def _computed(run_id: str) -> int:
    """Units the workers computed, from the task's reports."""
    from runs.store import reports, task_paths

    return sum(r.units_done for _, r in reports(task_paths(run_id, "work")))


def _finished(identity: Any, task: dict[str, Any], **options: Any) -> dict[str, Any]:
    from _timeline import wait_for_end  # imports the models: once Django is set up

    run, called = _submit(identity, task, **options)
    ended, _ = wait_for_end(run.pk, timeout=1800)
    if ended.state != "succeeded":
        raise SystemExit(f"run {run.pk} ended {ended.state}: {ended.message}")
    return {
        "run": run.pk,
        "wall_s": ended.ended_at.timestamp() - called,
        "units_computed": _computed(run.pk),
    }


def _cancelled_half_way(identity: Any, task: dict[str, Any], units: int) -> dict[str, Any]:
    from _timeline import wait_for_end

    from runs.models import Run
    from runs.services.runs import cancel_run
    from runs.store import task_paths
    from simrun_harness.ledger_reads import counts

    run, _ = _submit(identity, task, reuse=False)
    paths = task_paths(run.pk, "work")

    def half() -> bool:
        found = counts(paths)
        return found is not None and found.done >= units / 2

    wait_for(half, timeout=1800, what="half of the units done", every=0.05)
    cancel_run(run_id=run.pk, identity=identity)
    wait_for_end(run.pk, timeout=300)
    # cancelled at once; its pods are stopped in the background: wait, so they hold no core
    wait_for(
        lambda: not Run.objects.get(pk=run.pk).pending_cancel,
        timeout=300,
        what="the cancelled run's pods stopped",
        every=0.1,
    )
    found = counts(paths)
    done = found.done if found else 0
    return {"run": run.pk, "done_fraction": done / units}


def repeat(identity: Any, task: dict[str, Any], units: int) -> dict[str, Any]:
    from runs.models import Run
    from runs.selectors.reuse import run_reuse

    cancelled = _cancelled_half_way(identity, task, units)
    resumed = _finished(identity, task, resume_from=cancelled["run"])
    view = run_reuse(Run.objects.get(pk=resumed["run"]))
    resumed["reused"] = view.reused
    if set(view.sources) - {cancelled["run"]}:
        raise SystemExit(f"the resumed run reused units of other runs: {view.sources}")
    clean = _finished(identity, task, reuse=False)  # after: nothing could reuse its units
    return {
        "units": units,
        "clean": clean,
        "cancelled": cancelled,
        "resumed": resumed,
        "ratio": resumed["wall_s"] / clean["wall_s"],
        "computed_ratio": resumed["units_computed"] / clean["units_computed"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--units", type=int, default=600)
    parser.add_argument("--seconds", type=float, default=0.2)
    parser.add_argument("--type", choices=("sleep", "spin"), default="sleep")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    task = {
        "id": "work",
        "type": args.type,
        "settings": {"units": args.units, "seconds": args.seconds},
        "split": "none",
    }
    with stack(services=True):
        from runs.services.identities import create_identity

        identity = create_identity(name="bench", kind="person", password="bench-pw-123")
        warm = {**task, "settings": {"units": 4, "seconds": 0.0}}
        _finished(identity, warm, reuse=False)  # the worker's first submission
        results = []
        for i in range(args.repeats):
            units = args.units + i
            settings = {"units": units, "seconds": args.seconds}
            results.append(repeat(identity, {**task, "settings": settings}, units))
    load = os.getloadavg()
    summary = {
        "units": args.units,
        "seconds": args.seconds,
        "type": args.type,
        "repeats": results,
        "ratio_median": statistics.median(r["ratio"] for r in results),
        "load_average": load,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    for r in results:
        print(
            f"clean {r['clean']['wall_s']:.1f} s; cancelled at "
            f"{r['cancelled']['done_fraction']:.0%}; resumed {r['resumed']['wall_s']:.1f} s "
            f"(reused {r['resumed']['reused']}, computed {r['resumed']['units_computed']} of "
            f"{r['units']}); wall ratio {r['ratio']:.3f}; units computed ratio "
            f"{r['computed_ratio']:.3f}"
        )
    print(f"resumed ÷ clean (median): {summary['ratio_median']:.3f}  (goal ≤ 0.55)")
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()

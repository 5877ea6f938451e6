"""Benchmark: submission → first unit done, warm environment, on the local backend.

A small split task of the `spin` type (no model, so the environment is the service's own:
warm) is submitted with `create_run`, as the CLI and the API do, to a real Celery worker and
watcher on a throwaway database. The time runs from `create_run` returning to the time stamped
on the first `unit_done` line of the task's progress file. One warm-up run first (the worker's
first submission imports the planner), then `--runs` runs one after the other, each on an idle
node (the previous one has ended). Prints p50 and p90, and where the time goes:

    submit   create_run returned → the backend created the coordinator's attempt
             (Celery delivery, the submission task, the backend's submit and first tick)
    launch   attempt created → the pod process started (the supervisor's start), or, for a
             pod handed to a standby (docs/local-backend.md), → the standby took the attempt
             (the claim, the hand-over and whatever was left of the standby's imports)
    harness  pod process started (or took the attempt) → first unit done (a fresh one's
             interpreter and imports; the ledger, the pool, one unit)

`--standby N` sets SIMRUN_LOCAL_STANDBY for the services (default: the setting's default,
2; 0: every pod a fresh process, as before standbys).

`--churn` installs another virtual environment over and over while the runs go on: uv makes
it, installs the packages a pod of the service's environment imports (pydantic, psutil and
theirs, at the service's versions) from its cache, and removes it. uv hard-links those files
from its cache into every environment, so each install moves the change time of files a
standby imported; the summary says how many pods were handed to a standby all the same.

    python bench/local/first_unit.py [--runs 10] [--units 4] [--seconds 0.005]
                                     [--standby N] [--churn] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

from _stack import quantile, stack, wait_for


def measure_one(identity: object, units: int, seconds: float, name: str) -> dict[str, float]:
    """Submit one run, wait for its first unit and for its end; the phases in seconds."""
    from _timeline import pod_times, submit, unit_done_times, wait_for_end

    task = {
        "id": "spin",
        "type": "spin",
        "settings": {"units": units, "seconds": seconds},
        "split": "auto",
    }
    run, called, returned = submit(identity, task, name)
    first = wait_for(
        lambda: unit_done_times(run.pk, "spin"), timeout=120, what="the first unit", every=0.005
    )[0]
    ended, _ = wait_for_end(run.pk)
    if ended.state != "succeeded":
        raise SystemExit(f"run {run.pk} ended {ended.state}: {ended.message}")
    pod = pod_times(run.pk, "spin-w0")
    assert pod is not None and pod.started is not None
    return {
        "total": first - returned,
        "create_run": returned - called,
        "submit": pod.created - returned,
        "launch": pod.started - pod.created,
        "harness": first - pod.started,
        "standby": float(pod.adopted),
    }


CHURNED = ("pydantic", "pydantic-core", "annotated-types", "typing-extensions", "psutil")


@contextlib.contextmanager
def churn(enabled: bool) -> Iterator[list[int]]:
    """While it lasts, another environment is made, filled from uv's cache and removed, again
    and again (a thread); the count of installs so far."""
    installs = [0]
    if not enabled:
        yield installs
        return
    import uv

    stop = threading.Event()
    pins = [f"{name}=={version(name)}" for name in CHURNED]
    where = Path(tempfile.mkdtemp(prefix="simrun-churn-"))

    def loop() -> None:
        while not stop.is_set():
            venv = where / f"venv-{installs[0]}"
            subprocess.run([uv.find_uv_bin(), "venv", "-q", "--python", sys.executable, venv])
            python = venv / "bin" / "python"
            subprocess.run([uv.find_uv_bin(), "pip", "install", "-q", "--python", python, *pins])
            shutil.rmtree(venv, ignore_errors=True)
            installs[0] += 1

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield installs
    finally:
        stop.set()
        thread.join()
        shutil.rmtree(where, ignore_errors=True)


def measure_all(identity: object, args: argparse.Namespace) -> list[dict[str, float]]:
    samples = []
    for i in range(args.runs):
        sample = measure_one(identity, args.units, args.seconds, f"first-unit-{i}")
        samples.append(sample)
        print(
            f"run {i + 1:2d}: {sample['total']:.3f} s  (submit {sample['submit']:.3f}, "
            f"launch {sample['launch']:.3f}, harness {sample['harness']:.3f}; "
            f"create_run itself {sample['create_run']:.3f})"
            + ("  [standby]" if sample["standby"] else "")
        )
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--units", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=0.005, help="CPU seconds per unit")
    parser.add_argument("--standby", type=int, default=None, help="SIMRUN_LOCAL_STANDBY")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument(
        "--churn", action="store_true", help="install another environment meanwhile, repeatedly"
    )
    args = parser.parse_args()
    extra = {} if args.standby is None else {"SIMRUN_LOCAL_STANDBY": str(args.standby)}
    with stack(services=True, extra_env=extra):
        from runs.services.identities import create_identity

        identity = create_identity(name="bench", kind="person", password="bench-pw-123")
        started = time.monotonic()
        measure_one(identity, args.units, args.seconds, "warm-up")
        print(f"warm-up run done in {time.monotonic() - started:.1f} s")
        with churn(args.churn) as installs:
            samples = measure_all(identity, args)
        if args.churn:
            print(f"another environment was installed {installs[0]} times meanwhile")
    totals = [s["total"] for s in samples]

    summary = {
        "runs": args.runs,
        "standby_runs": int(sum(s["standby"] for s in samples)),
        "p50_s": quantile(totals, 0.5),
        "p90_s": quantile(totals, 0.9),
        "phase_medians_s": {
            k: statistics.median(s[k] for s in samples)
            for k in ("create_run", "submit", "launch", "harness")
        },
    }
    print(
        f"\nsubmission → first unit done, {args.runs} runs "
        f"({summary['standby_runs']} handed to a standby): "
        f"p50 {summary['p50_s']:.3f} s, p90 {summary['p90_s']:.3f} s"
    )
    phases = summary["phase_medians_s"]
    assert isinstance(phases, dict)
    print("medians of the phases: " + ", ".join(f"{k} {v:.3f} s" for k, v in phases.items()))
    if args.json:
        print(json.dumps({**summary, "samples": samples}, indent=1))


if __name__ == "__main__":
    main()

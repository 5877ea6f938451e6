"""Benchmark of the command line's start: how soon `simrun` answers, beside a bare Django import.

    .venv/bin/python bench/cli/startup.py [--rounds 7]

Each round runs, as separate processes and in this order so all see the same machine:
`python -c "import django"` (the baseline), `simrun validate` of the example ODE workflow,
`simrun submit` of it (the process ends once the run is recorded: run created), and
`simrun show` of that run. The embedded default under a temporary data directory (SQLite,
migrated once before the rounds); nothing runs the submitted runs. Reports the median wall
time of each and its ratio to the baseline. Goals (issue 18, idle machine): validate ≤ 0.5 s,
submit → run created ≤ 1 s, show ≤ 0.5 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = Path(sys.executable)
SIMRUN = PYTHON.parent / "simrun"
WORKFLOW = ROOT / "examples" / "workflows" / "repressilator-ode.yaml"
GOALS = {"validate": 0.5, "submit": 1.0, "show": 0.5}


def timed(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds of one process and its standard output; it must succeed."""
    started = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return seconds, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="simrun-cli-bench-") as data:
        prefixes = ("SIMRUN_", "DATABASE_", "CELERY_", "DJANGO_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
        env["SIMRUN_DATA_DIR"] = data
        timed([str(PYTHON), "manage.py", "migrate", "-v", "0"], env)
        times: dict[str, list[float]] = {"import django": [], **{k: [] for k in GOALS}}
        for _ in range(rounds):
            times["import django"].append(timed([str(PYTHON), "-c", "import django"], env)[0])
            times["validate"].append(timed([str(SIMRUN), "validate", str(WORKFLOW)], env)[0])
            seconds, out = timed([str(SIMRUN), "submit", str(WORKFLOW)], env)
            times["submit"].append(seconds)
            run_id = out.split()[2]  # "submitted run <id> (<name>)"
            times["show"].append(timed([str(SIMRUN), "show", run_id], env)[0])
    base = statistics.median(times["import django"])
    print(f"{rounds} rounds, medians (wall seconds)")
    print(f"{'command':16} {'median':>8} {'÷ import django':>16} {'goal':>6}")
    for name, values in times.items():
        median = statistics.median(values)
        goal = f"{GOALS[name]:.1f}" if name in GOALS else ""
        verdict = "" if name not in GOALS else ("  met" if median <= GOALS[name] else "  missed")
        print(f"{name:16} {median:8.3f} {median / base:16.1f} {goal:>6}{verdict}")


if __name__ == "__main__":
    main()

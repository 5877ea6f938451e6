"""Benchmark of the command line's start: how soon `simrun` answers, beside a bare Django import.

    .venv/bin/python bench/cli/startup.py [--rounds 7]

The embedded default under a temporary data directory (SQLite), with `simrun serve` running in
it. Each round runs, as separate processes and in this order so all see the same machine:
`python -c "import django"` (the baseline), `simrun validate` of the example ODE workflow,
`simrun submit` of it (the process ends once the run is recorded: run created) and `simrun show`
of that run, both HTTP requests to the running service (no Django in the command). Each run is
cancelled right after (not timed), so the service's worker computes little meanwhile. Reports
the median wall and CPU time of each and its ratio to the baseline. Goals (idle machine):
validate <= 0.5 s, submit -> run created <= 1 s, show <= 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
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
GOALS = {"validate": 0.5, "submit": 1.0, "show": 0.3}


CPU: dict[str, list[float]] = {}


def timed(args: list[str], env: dict[str, str], name: str = "") -> tuple[float, str]:
    """Wall seconds of one process and its standard output; it must succeed. Its CPU seconds
    (user + system) go to CPU[name]: on a loaded machine they say what an idle one would."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    CPU.setdefault(name, []).append(cpu)
    return seconds, done.stdout


def serve(env: dict[str, str], data: Path) -> subprocess.Popen[bytes]:
    """`simrun serve` on a free port of this data directory, once it serves."""
    log = (data / "serve.log").open("wb")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    proc = subprocess.Popen(
        [str(SIMRUN), "serve", "--port", port], env=env, cwd=ROOT, stdout=log, stderr=log
    )
    deadline = time.monotonic() + 180
    while "serving on" not in (data / "serve.log").read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"simrun serve did not start:\n{(data / 'serve.log').read_text()}")
        time.sleep(0.2)
    return proc


def rounds_of(rounds: int, env: dict[str, str]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"import django": [], **{k: [] for k in GOALS}}
    for _ in range(rounds):
        django = timed([str(PYTHON), "-c", "import django"], env, "import django")
        times["import django"].append(django[0])
        times["validate"].append(
            timed([str(SIMRUN), "validate", str(WORKFLOW)], env, "validate")[0]
        )
        seconds, out = timed([str(SIMRUN), "submit", str(WORKFLOW)], env, "submit")
        times["submit"].append(seconds)
        run_id = out.split()[2]  # "submitted run <id> (<name>)"
        times["show"].append(timed([str(SIMRUN), "show", run_id], env, "show")[0])
        timed([str(SIMRUN), "cancel", run_id], env, "cancel")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="simrun-cli-bench-") as data:
        prefixes = ("SIMRUN_", "DATABASE_", "CELERY_", "DJANGO_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
        env["SIMRUN_DATA_DIR"] = data
        served = serve(env, Path(data))
        try:
            times = rounds_of(rounds, env)
        finally:
            served.terminate()
            served.wait(timeout=120)
    report(rounds, times)


def report(rounds: int, times: dict[str, list[float]]) -> None:
    base = statistics.median(times["import django"])
    cpu_base = statistics.median(CPU["import django"])
    print(f"{rounds} rounds, medians; load average {os.getloadavg()[0]:.1f}")
    heads = ("wall s", "÷ django", "cpu s", "÷ django", "goal s")
    print(f"{'command':16} " + " ".join(f"{h:>9}" for h in heads))
    for name, values in times.items():
        median, cpu = statistics.median(values), statistics.median(CPU[name])
        goal = f"{GOALS[name]:.1f}" if name in GOALS else ""
        verdict = "" if name not in GOALS else ("  met" if median <= GOALS[name] else "  missed")
        print(
            f"{name:16} {median:9.3f} {median / base:9.1f} {cpu:9.3f} {cpu / cpu_base:9.1f}"
            f" {goal:>9}{verdict}"
        )


if __name__ == "__main__":
    main()

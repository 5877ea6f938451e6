"""What an idle `simrun serve` costs: CPU seconds a minute of serve itself and of each service.

    flock /tmp/simrun-bench.lock nice .venv/bin/python bench/local/serve_idle.py --seconds 120

Starts `simrun serve` on the embedded default in a fresh data directory, waits `--settle`
seconds for start-up to pass, then reads the CPU time (user + system, from /proc) of serve and
of each service's process tree over `--seconds` with no run submitted, and prints CPU seconds
a minute for each and in all, with the load average before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.local._chaos import service_pids  # noqa: E402
from bench.local._soak_parts import SIMRUN, free_port  # noqa: E402


def cpu_s(pid: int) -> float:
    """CPU seconds of a process and its live descendants."""
    total = 0.0
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                total += times.user + times.system
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--settle", type=float, default=40)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="simrun-idle-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIMRUN_", "DATABASE_"))}
    env["SIMRUN_DATA_DIR"] = str(work / "simrun")
    with (work / "serve.out").open("wb") as out:
        serve = subprocess.Popen(
            [str(SIMRUN), "serve", "--port", str(free_port())],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        while "serving on" not in (work / "serve.out").read_text():
            if serve.poll() is not None:
                raise SystemExit((work / "serve.out").read_text())
            time.sleep(0.5)
        time.sleep(args.settle)  # start-up (imports, migrations) is not idle cost
        pids = {"serve": serve.pid, **service_pids(work / "simrun")}
        load_before = os.getloadavg()
        before = {name: cpu_s(pid) for name, pid in pids.items()}
        serve_own = psutil.Process(serve.pid).cpu_times()
        time.sleep(args.seconds)  # the measured interval itself
        after = {name: cpu_s(pid) for name, pid in pids.items()}
        serve_end = psutil.Process(serve.pid).cpu_times()
        per_minute = 60 / args.seconds
        report = {
            "seconds": args.seconds,
            "cpu_s_per_minute": {
                "serve itself": round(
                    (serve_end.user + serve_end.system - serve_own.user - serve_own.system)
                    * per_minute,
                    3,
                ),
                **{
                    name: round((after[name] - before[name]) * per_minute, 3)
                    for name in pids
                    if name != "serve"
                },
            },
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        }
        report["cpu_s_per_minute"]["all"] = round(  # type: ignore[index]
            sum(report["cpu_s_per_minute"].values()),  # type: ignore[attr-defined]
            3,
        )
        print(json.dumps(report, indent=1))
    finally:
        subprocess.run([str(SIMRUN), "stop"], env=env, cwd=ROOT, capture_output=True)
        serve.wait(timeout=120)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

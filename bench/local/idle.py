"""Benchmark: what an idle `simrun serve` costs — CPU seconds per minute and memory per service.

Starts `simrun serve` on the embedded default in a fresh data directory (SQLite, the file
broker, the local backend; a free port), waits until it serves, lets it settle
(`--settle`, default 30 s: start-up, the first ticks, standbys of nothing), then measures
for `--minutes` (default 1) with nothing to do: per process, the user + system seconds it
used (from `/proc/<pid>/stat`, at the start and the end of the window; a process started in
the window counts from its start), grouped by service (serve itself; web; the Celery worker
with its pool and beat; the watcher; standby pods), and each process's memory at the end:
USS (the pages only it holds: what the machine gets back when it ends), PSS (its share of
every page it maps: the PSS of all processes adds up to the memory they take, shared pages
once) and RSS. The services' parent, which forks them, is counted as `parent`. Goals:
≤ 0.3 CPU-s per minute and ≤ 150 MB USS in all.

    python bench/local/idle.py [--minutes 1] [--settle 30] [--runs 0] [--set NAME=VALUE] [--json]

`--set SIMRUN_FORK_SERVICES=false` measures the services started by their command lines.

`--runs N` first makes N small runs and waits for them to end (the services warm, a
standby kept for the environment), then settles and measures: idle after work.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]
SIMRUN = Path(sys.executable).parent / "simrun"
TICKS = os.sysconf("SC_CLK_TCK")
WORKFLOW = (
    "name: idle\ntasks:\n  - id: naps\n    type: sleep\n    settings: {units: 4, seconds: 0.1}\n"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu(pid: int) -> float | None:
    """User + system seconds of one process, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def service_of(proc: psutil.Process, services: dict[int, str], serve: int) -> str:
    """The service a process belongs to: the service whose tree holds it, a standby pod,
    or serve itself."""
    try:
        line = " ".join(proc.cmdline())
    except psutil.Error:
        return "gone"
    if "standby" in line:
        return "standby"
    if "runs.cli.service_parent" in line:
        return "parent"
    for parent in [proc, *proc.parents()]:
        if parent.pid in services:
            return services[parent.pid]
        if parent.pid == serve:
            return "serve"
    return "other"


def tree(serve: int) -> list[psutil.Process]:
    """serve and every process under it (pods and standbys run in sessions of their own but
    stay its descendants: serve is their subreaper)."""
    try:
        root = psutil.Process(serve)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def services(data_dir: Path) -> dict[int, str]:
    """The main process of each service, from serve's services.json."""
    try:
        state = json.loads((data_dir / "services.json").read_text())
    except (OSError, ValueError):
        return {}
    return {s["pid"]: s["name"] for s in state["services"] if s.get("pid")}


def measure(data_dir: Path, serve: int, seconds: float) -> dict[str, dict[str, Any]]:
    """Per service: CPU seconds over `seconds`, processes, USS and RSS at the end."""
    start = {p.pid: (_cpu(p.pid) or 0.0, p) for p in tree(serve)}
    time.sleep(seconds)  # the window measured: nothing else happens
    names = services(data_dir)
    found: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"cpu_s": 0.0, "processes": 0, "uss_mb": 0.0, "pss_mb": 0.0, "rss_mb": 0.0}
    )
    for proc in tree(serve):
        now = _cpu(proc.pid)
        if now is None:
            continue
        before = start.get(proc.pid, (0.0, None))[0]
        service = service_of(proc, names, serve)
        part = found[service]
        part["cpu_s"] += max(0.0, now - before)
        part["processes"] += 1
        try:
            memory = proc.memory_full_info()
        except psutil.Error:
            continue
        part["uss_mb"] += memory.uss / 1e6
        part["pss_mb"] += memory.pss / 1e6
        part["rss_mb"] += memory.rss / 1e6
    return dict(found)


def make_runs(env: dict[str, str], count: int, work: Path) -> None:
    """`count` small runs through the command line, each waited for."""
    workflow = work / "idle.yaml"
    workflow.write_text(WORKFLOW)
    for _ in range(count):
        subprocess.run(
            [str(SIMRUN), "submit", str(workflow), "--follow"],
            env=env,
            check=True,
            capture_output=True,
            timeout=300,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--settle", type=float, default=30.0, help="seconds before measuring")
    parser.add_argument("--runs", type=int, default=0, help="small runs made before settling")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a setting of serve"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="simrun-idle-"))
    data_dir = work / "simrun"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SIMRUN_", "DATABASE_", "CELERY_", "DJANGO_"))
    }
    env["SIMRUN_DATA_DIR"] = str(data_dir)
    env.update(setting.split("=", 1) for setting in args.set)
    out = (work / "serve.out").open("ab")
    proc = subprocess.Popen(
        [str(SIMRUN), "serve", "--port", str(_free_port())],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while "serving on" not in (work / "serve.out").read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"simrun serve did not start; see {work / 'serve.out'}")
            time.sleep(0.5)
        if args.runs:
            make_runs(env, args.runs, work)
        time.sleep(args.settle)
        load = os.getloadavg()
        found = measure(data_dir, proc.pid, args.minutes * 60)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(work, ignore_errors=True)
    report(args, found, load)


def report(args: argparse.Namespace, found: dict[str, dict[str, Any]], load: Any) -> None:
    per_minute = {name: part["cpu_s"] / args.minutes for name, part in found.items()}
    print(
        f"simrun serve idle for {args.minutes:g} min (after {args.runs} runs and "
        f"{args.settle:g} s; load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}):"
    )
    for name in sorted(found):
        part = found[name]
        print(
            f"  {name:8s} {per_minute[name]:6.3f} CPU-s/min  {part['processes']} processes  "
            f"USS {part['uss_mb']:6.1f} MB  PSS {part['pss_mb']:6.1f} MB  "
            f"RSS {part['rss_mb']:6.1f} MB"
        )
    total_cpu = sum(per_minute.values())
    total_uss = sum(part["uss_mb"] for part in found.values())
    total_pss = sum(part["pss_mb"] for part in found.values())
    processes = sum(part["processes"] for part in found.values())
    print(
        f"  total    {total_cpu:6.3f} CPU-s/min  {processes} processes  USS {total_uss:6.1f} MB"
        f"  PSS {total_pss:6.1f} MB  (goals: ≤ 0.3 CPU-s/min, ≤ 150 MB USS)"
    )
    if args.json:
        print(json.dumps({"per_minute": per_minute, "services": found}, indent=1))


if __name__ == "__main__":
    main()

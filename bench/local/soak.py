"""Soak with chaos: `simrun serve` left running under a steady stream of small runs while
processes are killed at random.

    .venv/bin/python bench/local/soak.py --minutes 60

Starts `simrun serve` on the embedded default (SQLite, the file broker, the local backend)
in a fresh data directory, as a user does, and for `--minutes`:

- submits a small run (`--units` units of `sleep`, `--seconds` each) every `--every` seconds;
- every 30-120 s (scaled down for short soaks, never under 10-20 s) kill -9s a random
  service (web, worker, watcher) or pod process;
- samples the resident memory of each service (its process tree, pods excluded).

Then it stops the chaos and waits (`--drain` seconds at most) for every run to end, and
reports runs submitted / succeeded / failed / stuck (not ended), units lost or done twice (from
the ledgers and progress files in the store), the restarts serve did by itself, the manual
restarts the soak had to do (serve gave up), and per service the memory of the first and the
last tenth of the samples. With `--json FILE` the report is also written as JSON. Exit 0 when
nothing was lost, doubled, stuck or failed and no manual restart was needed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.local._chaos import Memory, kill_one, ledger_counts, service_restarts  # noqa: E402

SIMRUN = Path(sys.executable).parent / "simrun"
WORKFLOW = """\
name: soak
tasks:
  - id: naps
    type: sleep
    settings: {{units: {units}, seconds: {seconds}}}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """`simrun serve` of the soak's data directory, started again if it gives up."""

    def __init__(self, data_dir: Path, env: dict[str, str]) -> None:
        self.data_dir, self.env = data_dir, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.manual_restarts = 0
        self.gave_up: list[str] = []

    def start(self) -> None:
        out = (self.data_dir.parent / "serve.out").open("ab")
        err = (self.data_dir.parent / "serve.err").open("ab")
        port = _free_port()
        self.proc = subprocess.Popen(
            [str(SIMRUN), "serve", "--port", str(port)],
            cwd=ROOT,
            env=self.env,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        deadline = time.monotonic() + 180
        while "serving on" not in (self.data_dir.parent / "serve.out").read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"simrun serve did not start; see {self.data_dir.parent}")
            time.sleep(0.5)

    def keep_up(self) -> None:
        """Start serve again if it exited (a manual restart, counted)."""
        if self.proc is not None and self.proc.poll() is not None:
            self.gave_up.append(f"exit {self.proc.returncode}")
            self.manual_restarts += 1
            self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=300)


def chaos_interval(minutes: float) -> tuple[float, float]:
    """30-120 s in a soak of an hour or more, shorter for shorter soaks (at least 10-20 s)."""
    scale = min(1.0, minutes / 60)
    return max(10.0, 30 * scale), max(20.0, 120 * scale)


def _loop(stop: threading.Event, every: tuple[float, float], act: Any, rng: random.Random) -> None:
    while not stop.wait(rng.uniform(*every)):
        act()


def soak(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="simrun-soak-"))
    data_dir = work / "simrun"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SIMRUN_", "DATABASE_", "CELERY_", "DJANGO_"))
    }
    env.update(SIMRUN_DATA_DIR=str(data_dir), SIMRUN_GRACE_S=str(args.grace))
    serve = Serve(data_dir, env)
    serve.start()
    os.environ.clear()
    os.environ.update(env)  # this process submits to the same installation
    from runs.cli.base import setup_django

    setup_django()
    from runs.cli.client import Unreachable, connect
    from runs.models import Run

    model = work / "model"
    model.mkdir()
    (model / "README.md").write_text("no environment of its own\n")
    text = WORKFLOW.format(units=args.units, seconds=args.seconds)
    rng = random.Random(args.seed)
    kills: list[str] = []
    memory = Memory()
    started = time.monotonic()
    stop_chaos, stop_sampling = threading.Event(), threading.Event()
    sample_every = max(1.0, args.minutes * 60 / 200)

    def kill() -> None:
        what = kill_one(data_dir, rng)
        if what:
            kills.append(what)
            print(f"{time.monotonic() - started:7.1f}s chaos: killed {what}", flush=True)

    threads = [
        threading.Thread(
            target=_loop, args=(stop_chaos, chaos_interval(args.minutes), kill, rng), daemon=True
        ),
        threading.Thread(
            target=_loop,
            args=(
                stop_sampling,
                (sample_every, sample_every),
                lambda: memory.sample(data_dir, time.monotonic() - started),
                # not the chaos's: draws shared between two threads would make the kills'
                # times depend on the threads' interleaving, not on --seed alone
                random.Random(),
            ),
            daemon=True,
        ),
    ]
    for thread in threads:
        thread.start()
    client = connect()
    submitted: list[str] = []
    end = started + args.minutes * 60
    while time.monotonic() < end:
        serve.keep_up()
        # reuse off: the same workflow again and again, each run computing its units; a web
        # process killed by the chaos is waited out, the key keeping a retry from a second run
        key = f"soak-{len(submitted)}"
        while True:
            try:
                run = client.submit(text, [model], group="soak", reuse=False, idempotency_key=key)
                break
            except Unreachable:
                time.sleep(1.0)
        submitted.append(run["id"])
        time.sleep(max(0.0, min(args.every, end - time.monotonic())))
    stop_chaos.set()
    print(f"{time.monotonic() - started:7.1f}s chaos stopped; draining", flush=True)
    ended = {"succeeded", "failed", "cancelled"}
    deadline = time.monotonic() + args.drain
    while time.monotonic() < deadline:
        serve.keep_up()
        states = dict(Run.objects.filter(pk__in=submitted).values_list("pk", "state"))
        if all(states.get(r) in ended for r in submitted):
            break
        time.sleep(2)
    stop_sampling.set()
    states = dict(Run.objects.filter(pk__in=submitted).values_list("pk", "state"))
    messages = dict(Run.objects.filter(pk__in=submitted).values_list("pk", "message"))
    units = lost = twice = 0
    for run_id in submitted:
        u, lo, tw = ledger_counts(data_dir / "store" / "runs" / run_id)
        units, lost, twice = units + u, lost + lo, twice + tw
    restarts = service_restarts(data_dir)
    serve.stop()
    report = {
        "minutes": args.minutes,
        "runs": {
            "submitted": len(submitted),
            "succeeded": sum(1 for r in submitted if states.get(r) == "succeeded"),
            "failed": sum(1 for r in submitted if states.get(r) == "failed"),
            "stuck": sum(1 for r in submitted if states.get(r) not in ended),
        },
        "failures": {r: messages[r] for r in submitted if states.get(r) == "failed"},
        "units": {"total": units, "lost": lost, "done_twice": twice},
        "kills": {name: kills.count(name) for name in sorted(set(kills))},
        "service_restarts": restarts,
        "manual_restarts": serve.manual_restarts,
        "memory": memory.tenths(),
        "data_dir": str(data_dir),
        "seconds": round(time.monotonic() - started, 1),
    }
    if not args.keep_files:
        shutil.rmtree(work, ignore_errors=True)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--every", type=float, default=10.0, help="seconds between submissions")
    parser.add_argument("--units", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=1.0, help="seconds each unit sleeps")
    parser.add_argument("--grace", type=int, default=5, help="SIMRUN_GRACE_S of the services")
    parser.add_argument("--drain", type=float, default=600, help="most seconds to wait at the end")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--keep-files", action="store_true")
    args = parser.parse_args()
    report = soak(args)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    runs, units = report["runs"], report["units"]
    clean = runs["failed"] == runs["stuck"] == units["lost"] == units["done_twice"] == 0
    return 0 if clean and report["manual_restarts"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

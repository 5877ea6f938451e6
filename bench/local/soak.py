"""Soak with chaos: `simrun serve` left running under a steady stream of small runs while every
kind of its processes is killed at random, and its disk is filled once.

    sudo .venv/bin/python bench/local/soak.py --minutes 60

Starts `simrun serve` on the embedded default (SQLite, the file broker, the local backend) in
a fresh data directory, as a user does, and for `--minutes`:

- submits a small run (`--units` units of `sleep`, `--seconds` each) every `--every` seconds;
- every 30-120 s (scaled down for short soaks, never under 10-20 s) kill -9s one process of a
  kind taken in turn, in a new random order each round, so each kind is killed as often: web,
  the worker's main process, each pool process of the worker (its pool has none: the kill
  finds nothing, and says so), beat, the watcher, a pod, a pod's supervisor, a waiting standby,
  and serve itself, which the soak then starts again with `simrun serve` as an operator would;
- once, at 40% of the soak, fills the disk of the data directory for `--disk-full-s` seconds,
  then frees it (the data directory is on a tmpfs of `--disk-mb`: mounting one needs root or
  CAP_SYS_ADMIN; without, the fill is skipped and the report says why);
- samples the resident memory of each service (its process tree, pods excluded).

Then it stops the chaos, waits (`--drain` seconds at most) for every run to end, stops serve
with `simrun stop`, and reports: runs submitted / succeeded / failed / stuck (and submissions
refused while the disk was full), units lost or done twice (from the ledgers and progress
files), kills per kind, the restarts serve did by itself, the manual actions the soak had to
take (serve gave up and had to be started again: must be 0), the processes of the
installation left after `simrun stop` (must be 0), and the time from each kill to the first
unit done by the first run submitted after it (p50, p90). With `--json FILE` the report is
also written as JSON. Exit 0 when nothing was lost, doubled, stuck or failed, no manual action
was needed and nothing was left after stop.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.local._chaos import (  # noqa: E402
    KindCycle,
    Memory,
    first_progress,
    kill_kind,
    ledger_counts,
    processes_of,
)
from bench.local._soak_parts import Disk, Serve, percentile  # noqa: E402

FIND_TRIES = 15  # seconds the chaos looks for a process of the kind it is to kill

WORKFLOW = """\
name: soak
tasks:
  - id: naps
    type: sleep
    settings: {{units: {units}, seconds: {seconds}}}
"""


def chaos_interval(minutes: float) -> tuple[float, float]:
    """30-120 s in a soak of an hour or more, shorter for shorter soaks (at least 10-20 s)."""
    scale = min(1.0, minutes / 60)
    return max(10.0, 30 * scale), max(20.0, 120 * scale)


class Chaos:
    """The kills, each with its time and kind (`pid` None: nothing of that kind was there)."""

    def __init__(self, data_dir: Path, serve: Serve, rng: random.Random, started: float) -> None:
        self.data_dir, self.serve, self.rng, self.started = data_dir, serve, rng, started
        self.cycle = KindCycle(rng)
        self.kills: list[tuple[float, str, int | None]] = []

    def once(self) -> None:
        kind = self.cycle.next()
        if kind == "serve":
            at, pid = time.time(), self.serve.kill_and_start_again()
        else:
            # a pod or a standby is there only part of the time: look again for a while
            for _ in range(1 if kind == "pool" else FIND_TRIES):
                at, pid = time.time(), kill_kind(self.data_dir, kind, self.rng)
                if pid:
                    break
                time.sleep(1.0)
        self.kills.append((at, kind, pid))
        what = f"pid {pid}" if pid else "none there"
        print(f"{time.monotonic() - self.started:7.1f}s chaos: {kind} ({what})", flush=True)

    def loop(self, stop: threading.Event, every: tuple[float, float]) -> None:
        while not stop.wait(self.rng.uniform(*every)):
            self.once()


def _every(stop: threading.Event, seconds: float, act: Any) -> None:
    while not stop.wait(seconds):
        act()


def soak(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="simrun-soak-"))
    disk = Disk.mount(work / "disk", args.disk_mb) if args.disk_mb else None
    data_dir = (disk.path if disk and disk.mounted else work) / "simrun"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SIMRUN_", "DATABASE_", "CELERY_", "DJANGO_"))
    }
    env.update(SIMRUN_DATA_DIR=str(data_dir), SIMRUN_GRACE_S=str(args.grace))
    env.update(SIMRUN_DISK_MIN_FREE_MB=str(args.min_free_mb))
    serve = Serve(data_dir, env, work)
    serve.start()
    os.environ.clear()
    os.environ.update(env)  # this process submits to the same installation
    from runs.cli.base import setup_django

    setup_django()
    from runs.cli.client import ApiError, Unreachable, connect
    from runs.models import Run

    model = work / "model"
    model.mkdir()
    (model / "README.md").write_text("no environment of its own\n")
    text = WORKFLOW.format(units=args.units, seconds=args.seconds)
    rng = random.Random(args.seed)
    memory = Memory()
    started = time.monotonic()
    chaos = Chaos(data_dir, serve, rng, started)
    stop_chaos, stop_sampling = threading.Event(), threading.Event()
    sample_every = max(1.0, args.minutes * 60 / 200)
    threads = [
        threading.Thread(
            target=chaos.loop, args=(stop_chaos, chaos_interval(args.minutes)), daemon=True
        ),
        threading.Thread(
            target=_every,
            args=(
                stop_sampling,
                sample_every,
                lambda: memory.sample(data_dir, time.monotonic() - started),
            ),
            daemon=True,
        ),
    ]
    if disk is not None and disk.mounted:
        fill_at = args.minutes * 60 * 0.4
        hold = min(args.disk_full_s, args.minutes * 60 * 0.15)
        threads.append(
            threading.Thread(target=disk.fill_for, args=(fill_at, hold, stop_chaos), daemon=True)
        )
    for thread in threads:
        thread.start()
    client = connect()
    submitted: dict[str, float] = {}
    refused: list[str] = []
    end = started + args.minutes * 60
    while time.monotonic() < end:
        serve.keep_up()
        # reuse off: the same workflow again and again, each run computing its units; a web
        # process (or serve) killed by the chaos is waited out, the key keeping a retry from
        # making a second run; a refusal (the disk is full) is counted, not retried
        key = f"soak-{len(submitted) + len(refused)}"
        while True:
            try:
                run = client.submit(text, [model], group="soak", reuse=False, idempotency_key=key)
                submitted[run["id"]] = time.time()
                break
            except Unreachable:
                time.sleep(1.0)
            except (ApiError, OSError) as exc:
                refused.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                break
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
    progress: dict[str, float | None] = {}
    for run_id in submitted:
        run_dir = data_dir / "store" / "runs" / run_id
        u, lo, tw = ledger_counts(run_dir)
        units, lost, twice = units + u, lost + lo, twice + tw
        progress[run_id] = first_progress(run_dir)
    restarts = serve.restarts()
    said = serve.stop()
    orphans = processes_of(data_dir)
    report = {
        "minutes": args.minutes,
        "runs": {
            "submitted": len(submitted),
            "succeeded": sum(1 for r in submitted if states.get(r) == "succeeded"),
            "failed": sum(1 for r in submitted if states.get(r) == "failed"),
            "stuck": sum(1 for r in submitted if states.get(r) not in ended),
            "refused": len(refused),
        },
        "refusals": sorted(set(refused))[:5],
        "failures": {r: messages[r] for r in submitted if states.get(r) == "failed"},
        "units": {"total": units, "lost": lost, "done_twice": twice},
        "kills": _kills(chaos.kills),
        "kill_to_progress_s": _kill_to_progress(chaos.kills, submitted, progress),
        "service_restarts": restarts,
        "serve_restarted_after_its_kill": serve.restarted_after_kill,
        "manual_actions": serve.manual_restarts,
        "gave_up": serve.gave_up,
        "stop_said": said,
        "orphans_after_stop": [f"{p.pid} {' '.join(p.info.get('cmdline') or [])}" for p in orphans],
        "disk": disk.report() if disk is not None else {"skipped": "--disk-mb 0"},
        "memory": memory.tenths(),
        "data_dir": str(data_dir),
        "seconds": round(time.monotonic() - started, 1),
    }
    for proc in orphans:
        proc.kill()
    if disk is not None:
        disk.unmount()
    if not args.keep_files:
        shutil.rmtree(work, ignore_errors=True)
    return report


def _kills(kills: list[tuple[float, str, int | None]]) -> dict[str, dict[str, int]]:
    """Per kind: processes killed, and rounds that found none of that kind to kill."""
    kinds = sorted({kind for _, kind, _ in kills})
    return {
        kind: {
            "killed": sum(1 for _, k, pid in kills if k == kind and pid),
            "none_there": sum(1 for _, k, pid in kills if k == kind and not pid),
        }
        for kind in kinds
    }


def _kill_to_progress(
    kills: list[tuple[float, str, int | None]],
    submitted: dict[str, float],
    progress: dict[str, float | None],
) -> dict[str, Any]:
    """Seconds from each kill to the first unit done by the first run submitted after it."""
    delays: list[float] = []
    from_submission: list[float] = []  # the part after that run was submitted
    never = 0
    for at, _, pid in kills:
        if not pid:
            continue
        later = sorted((t, r) for r, t in submitted.items() if t >= at)
        if not later:
            continue
        first = progress.get(later[0][1])
        if first is None:
            never += 1
        else:
            delays.append(first - at)
            from_submission.append(first - later[0][0])
    return {
        "kills": len(delays) + never,
        "p50": percentile(delays, 50),
        "p90": percentile(delays, 90),
        "max": round(max(delays), 1) if delays else None,
        "from_its_submission_p50": percentile(from_submission, 50),
        "from_its_submission_p90": percentile(from_submission, 90),
        "next_run_never_progressed": never,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--every", type=float, default=10.0, help="seconds between submissions")
    parser.add_argument("--units", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=1.0, help="seconds each unit sleeps")
    parser.add_argument("--grace", type=int, default=5, help="SIMRUN_GRACE_S of the services")
    parser.add_argument("--drain", type=float, default=600, help="most seconds to wait at the end")
    parser.add_argument("--disk-mb", type=int, default=512, help="tmpfs size; 0: no disk fill")
    parser.add_argument("--disk-full-s", type=float, default=60, help="how long it stays full")
    parser.add_argument("--min-free-mb", type=float, default=16, help="SIMRUN_DISK_MIN_FREE_MB")
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
    quiet = report["manual_actions"] == 0 and not report["orphans_after_stop"]
    return 0 if clean and quiet else 1


if __name__ == "__main__":
    sys.exit(main())

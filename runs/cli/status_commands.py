"""`simrun status|stop`: the services a `serve` (or `demo --keep`) started earlier."""

from __future__ import annotations

import argparse
import os
import signal
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from runs.cli.base import CommandError, setup_django
from runs.cli.service_state import ServeRecord, read_state

NOT_RUNNING = 3  # systemctl's code for a unit that is not running
STOP_TIMEOUT_S = 180.0  # the services' grace, then the pods' grace, with room


def register(sub: Any) -> None:
    p = sub.add_parser(
        "status", help="the services of `simrun serve` here: pid, up since, restarts"
    )
    p.set_defaults(handler=status)
    p = sub.add_parser("stop", help="stop the `simrun serve` (or `demo --keep`) running here")
    p.set_defaults(handler=stop)


def _data_dir() -> Path:
    setup_django()
    from django.conf import settings

    return Path(settings.DATA_DIR)


def _running(data_dir: Path) -> ServeRecord | None:
    record = read_state(data_dir)
    return record if record is not None and record.alive() else None


def _when(epoch: float | None) -> str:
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S") if epoch else "-"


def status(args: argparse.Namespace) -> int:
    """One line for serve, one per service; exit 3 when nothing serves here."""
    data_dir = _data_dir()
    record = _running(data_dir)
    if record is None:
        print(f"simrun is not running here ({data_dir}); `simrun serve` starts it")
        _say_disk()
        return NOT_RUNNING
    print(f"simrun serve (pid {record.pid}) at {record.url}, up since {_when(record.started)}")
    print(
        f"{'SERVICE':8} {'STATE':10} {'PID':>7}  {'UP SINCE':19} {'RESTARTS':>8}  "
        f"{'LAST SIGN OF LIFE':28}  LOG"
    )
    now = time.time()
    for s in record.services:
        pid = str(s.pid) if s.pid else "-"
        sign = f"{s.sign} {max(0, int(now - s.sign_at))} s ago" if s.sign_at else "none yet"
        print(
            f"{s.name:8} {s.state:10} {pid:>7}  {_when(s.up_since):19} {s.restarts:>8}  "
            f"{sign:28}  {s.log}"
        )
    restarted = [s for s in record.services if s.cause]
    if restarted:
        print("last restarts:")
        for s in restarted:
            print(f"  {s.name}: restarted {_when(s.cause_at)}: {s.cause}")
    print(f"last reconcile: {_last_reconciles()}")
    _say_disk()
    return 0


def _say_disk() -> None:
    """A line naming a full disk of this installation, if one is."""
    from runs.selectors.disk import installation_disk

    full = installation_disk()
    if full is not None:
        print(f"disk: {full.message()}; simrun goes on once space is freed")


def _last_reconciles() -> str:
    """When each reconciling process (the watcher, beat's task in the worker) last ended a
    pass, from the heartbeat rows the controller writes: a controller that stopped shows."""
    from django.utils import timezone

    from runs.selectors.heartbeat import last_reconcile

    now = timezone.now()
    parts = []
    for source in ("watcher", "worker"):
        last = last_reconcile(source=source)
        if last is None:
            parts.append(f"{source} never")
        else:
            ago = max(0, int((now - last).total_seconds()))
            local = timezone.localtime(last).strftime("%Y-%m-%d %H:%M:%S")
            parts.append(f"{source} {local} ({ago} s ago)")
    return ", ".join(parts)


def stop(args: argparse.Namespace) -> int:
    """SIGTERM to the serve of this data directory, and wait until it has stopped everything;
    then end what earlier serves left running (runs/cli/leftovers.py), saying what."""
    from runs.cli.leftovers import end_leftovers

    data_dir = _data_dir()
    record = _running(data_dir)
    if record is None:
        print(f"simrun is not running here ({data_dir})", flush=True)
    else:
        print(f"stopping simrun serve (pid {record.pid}) and its services", flush=True)
        os.kill(record.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while record.alive():
            if time.monotonic() > deadline:
                raise CommandError(
                    f"simrun serve (pid {record.pid}) did not stop within "
                    f"{STOP_TIMEOUT_S:.0f}s; see {data_dir / 'logs'}"
                )
            time.sleep(0.2)
        print("stopped", flush=True)
    ended = end_leftovers(data_dir, running=None)
    if ended is not None:
        print(ended)
    return 0

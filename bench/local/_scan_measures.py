"""What a large scan costs besides its time: the services' peak memory, the store's bytes per
unit, and how long the run's page and API views take to answer (`scan.py --units 100000`)."""

from __future__ import annotations

import contextlib
import os
import statistics
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

SUPERVISORS = ("cluster.local.supervisor", "cluster.local.standby_supervisor")
ROUTES = ("", "tasks/", "workers/", "outputs/")  # under /api/runs/<id>/


def _hwm_kb(pid: int) -> int:
    """The peak resident memory of a process (VmHWM), in KiB; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_rss_mb(services: dict[str, int]) -> dict[str, float]:
    """Per service: the peaks of its processes summed (pods and standbys left out), MB."""
    found: dict[str, float] = {}
    for name, pid in services.items():
        total, todo = 0, []
        with contextlib.suppress(psutil.Error):
            todo = [psutil.Process(pid)]
        while todo:
            proc = todo.pop()
            with contextlib.suppress(psutil.Error):
                if any(s in " ".join(proc.cmdline()) for s in SUPERVISORS):
                    continue
                total += _hwm_kb(proc.pid)
                todo.extend(proc.children())
        found[name] = total * 1024 / 1e6
    return found


def store_bytes(root: Path) -> tuple[int, int]:
    """(bytes the file system allocated, entries) under `root`: files and directories alike
    (an empty directory takes a block of its own on ext4)."""
    allocated = entries = 0
    for folder, directories, files in os.walk(root):
        for name in (*directories, *files):
            with contextlib.suppress(OSError):
                allocated += os.lstat(os.path.join(folder, name)).st_blocks * 512
                entries += 1
    return allocated, entries


def api_times_ms(
    base: str, secret: str, run_id: str, repeats: int = 5
) -> dict[str, tuple[float, float]]:
    """The time of each of the run's API views, over HTTP to the running service: the first
    request (what the web process had not read of the run yet) and the median of them."""
    found = {}
    for route in ROUTES:
        url = f"{base}/api/runs/{run_id}/{route}"
        times = []
        for _ in range(repeats):
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {secret}"})
            started = time.perf_counter()
            with urllib.request.urlopen(request, timeout=60) as answer:
                answer.read()
            times.append((time.perf_counter() - started) * 1000)
        found[f"/api/runs/<id>/{route}"] = (times[0], statistics.median(times))
    return found


def page_time_ms(user: Any, run_id: str, repeats: int = 5) -> tuple[float, float]:
    """The time of the run's page, rendered in this process (Django's test client): the
    first request and the median of them."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        answer = client.get(f"/runs/{run_id}/")
        times.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.status_code
    return times[0], statistics.median(times)

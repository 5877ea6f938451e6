"""serve's services are forked by one parent that imported what they share: each service
holds only what it wrote of that memory, and a parent that is gone is started again."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
import pytest

from tests.e2e.serving import Serving, serving
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

SERVICES = ("web", "worker", "beat", "watcher")
PARENT = "runs.cli.service_parent"
SHARED_MB = 8  # a forked service shares tens of MB of its parent's heap; one exec'd, ~none


def shared_dirty_mb(pid: int) -> float:
    """The written (anonymous, mostly) memory `pid` shares with other processes: what a fork
    shares with its parent until either writes it; an exec'd process shares next to none."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Shared_Dirty:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no Shared_Dirty in /proc/{pid}/smaps_rollup")


def parents(served: Serving) -> list[psutil.Process]:
    children = psutil.Process(served.proc.pid).children()
    return [p for p in children if PARENT in " ".join(p.cmdline())]


def services(served: Serving) -> dict[str, psutil.Process] | None:
    """Each service's process once all four are up, else None."""
    found = {}
    for name in SERVICES:
        try:
            found[name] = served.service(name)
        except (StopIteration, psutil.Error):
            return None
    return found


def test_serve_forks_its_services_from_one_parent_whose_memory_they_share(
    tmp_path: Path,
) -> None:
    with serving(tmp_path) as served:
        up = wait_for(lambda: services(served), what="the four services")
        shared = {name: shared_dirty_mb(proc.pid) for name, proc in up.items()}
        adopted = {name: proc.ppid() for name, proc in up.items()}
        titles = {name: " ".join(proc.cmdline()).rstrip() for name, proc in up.items()}
        data_dirs = {name: proc.environ().get("SIMRUN_DATA_DIR") for name, proc in up.items()}
        found_parents = parents(served)

    assert len(found_parents) == 1
    assert adopted == dict.fromkeys(SERVICES, served.proc.pid)  # serve's, as if it started them
    assert all(mb >= SHARED_MB for mb in shared.values()), shared
    assert "uvicorn simrun_site.asgi:application" in titles["web"]
    assert titles["watcher"].endswith("manage.py simrun watch")
    # a title is written over the command line only: the environment still says whose it is
    assert data_dirs == dict.fromkeys(SERVICES, str(served.data_dir))


def test_a_service_is_forked_by_a_new_parent_once_the_parent_was_killed(
    tmp_path: Path,
) -> None:
    with serving(tmp_path) as served:
        first = wait_for(lambda: services(served), what="the four services")["watcher"]
        (parent,) = parents(served)
        os.kill(parent.pid, signal.SIGKILL)
        os.kill(first.pid, signal.SIGKILL)
        again = wait_for(
            lambda: (s := services(served)) and s["watcher"].pid != first.pid and s["watcher"],
            what="the watcher started again",
        )
        shared = shared_dirty_mb(again.pid)
        new_parents = parents(served)
        status = served.simrun("status")

    assert [p.pid for p in new_parents] != [parent.pid] and len(new_parents) == 1
    assert shared >= SHARED_MB
    assert status.returncode == 0, status.stderr


def test_with_forking_off_each_service_is_started_by_its_command_line(tmp_path: Path) -> None:
    with serving(tmp_path, env={"SIMRUN_FORK_SERVICES": "false"}) as served:
        up = wait_for(lambda: services(served), what="the four services")
        shared = {name: shared_dirty_mb(proc.pid) for name, proc in up.items()}
        data_dirs = {name: proc.environ().get("SIMRUN_DATA_DIR") for name, proc in up.items()}
        found_parents = parents(served)

    assert found_parents == []
    assert all(mb < SHARED_MB for mb in shared.values()), shared
    # Celery titles its worker and beat over their command lines, not their environments
    assert data_dirs == dict.fromkeys(SERVICES, str(served.data_dir))

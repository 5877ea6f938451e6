"""What a serve that died left running is found by its records and ended, and said."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from runs.cli.leftovers import end_leftovers, records_dir
from runs.cli.service_state import ServeRecord, ServiceRecord, write_state

STUBBORN = ["sh", "-c", "trap '' TERM; while :; do sleep 1; done"]


@pytest.fixture
def spawn() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def _start(started: list[subprocess.Popen[bytes]]) -> tuple[subprocess.Popen[bytes], float]:
    proc = subprocess.Popen(STUBBORN, start_new_session=True)
    started.append(proc)
    return proc, psutil.Process(proc.pid).create_time()


def _pod(pid: int, started: float) -> dict[str, object]:
    return {"pid": pid, "started": started, "group": pid, "role": "pod"}


def _gone(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is not None


def test_a_pod_on_a_dead_serve_s_record_is_ended_and_named(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    pod, started = _start(spawn)
    records_dir(tmp_path).mkdir()
    (records_dir(tmp_path) / "1.json").write_text(
        json.dumps(
            {
                "what": "pod hold of run r1",
                "serve": "999999:1.0",
                "processes": [
                    {"pid": pod.pid, "started": started, "group": pod.pid, "role": "pod"}
                ],
            }
        )
    )

    said = end_leftovers(tmp_path, running=None, grace_s=0.5)

    assert said == (
        f"ended what an earlier simrun serve left running: the pod hold of run r1 (pid {pod.pid})"
    )
    pod.wait(timeout=10)
    assert not list(records_dir(tmp_path).iterdir())


def test_a_service_of_a_dead_serve_is_ended_and_named(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    web, started = _start(spawn)
    service = ServiceRecord("web", web.pid, 1.0, 0, "web.log", "running", started=started)
    write_state(tmp_path, ServeRecord(pid=999999, started=1.0, url="", services=[service]))

    said = end_leftovers(tmp_path, running=None, grace_s=0.5)

    assert (
        said == f"ended what an earlier simrun serve left running: the web process (pid {web.pid})"
    )
    web.wait(timeout=10)


def test_a_process_whose_pid_was_reused_is_left_alone(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    """The record's start time is not the live process's: it is another process now."""
    other, started = _start(spawn)
    service = ServiceRecord("web", other.pid, 1.0, 0, "web.log", "running", started=started - 5)
    write_state(tmp_path, ServeRecord(pid=999999, started=1.0, url="", services=[service]))

    assert end_leftovers(tmp_path, running=None, grace_s=0.5) is None
    assert not _gone(other)


def test_the_pods_of_the_running_serve_are_not_leftovers(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    pod, started = _start(spawn)
    me = psutil.Process()
    running = ServeRecord(pid=me.pid, started=me.create_time(), url="")
    records_dir(tmp_path).mkdir()
    (records_dir(tmp_path) / "1.json").write_text(
        json.dumps(
            {
                "what": "pod p of run r",
                "serve": f"{me.pid}:{me.create_time()!r}",
                "processes": [
                    {"pid": pod.pid, "started": started, "group": pod.pid, "role": "pod"}
                ],
            }
        )
    )

    assert end_leftovers(tmp_path, running=running, grace_s=0.5) is None
    assert not _gone(pod)

"""serve's side of the services' parent: a service it cannot fork is started as before, and
the supervisor that runs without Django."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from runs.cli.forked import ForkedProcess, ParentUnavailable, ServiceParent
from runs.cli.serving import ROOT, services_env
from runs.cli.supervision import Supervisor

STAYS = [sys.executable, "-c", "import time; time.sleep(300)"]


def forking_supervisor(
    tmp_path: Path, commands: dict[str, list[str]], said: list[str], *, settings_module: str
) -> Supervisor:
    """A supervisor whose services' parent sets Django up with `settings_module`."""
    env = services_env(tmp_path) | {"DJANGO_SETTINGS_MODULE": settings_module}
    return Supervisor(
        commands=commands,
        env=env,
        cwd=tmp_path,
        data_dir=tmp_path,
        say=said.append,
        parent=ServiceParent(env=env, cwd=ROOT),
    )


def test_a_service_the_parent_cannot_fork_is_started_by_its_command_line(tmp_path: Path) -> None:
    said: list[str] = []
    supervisor = forking_supervisor(
        tmp_path, {"sleeper": STAYS}, said, settings_module="simrun_site.settings"
    )
    supervisor.start()
    try:
        proc = supervisor.services["sleeper"].proc
        running = proc is not None and proc.poll() is None
    finally:
        supervisor.stop(grace_s=5, pods_grace_s=1)

    assert isinstance(proc, subprocess.Popen) and running
    assert said == [
        "the services' parent refused: ValueError: no such service to fork: 'sleeper'; "
        "starting the sleeper process by its command line"
    ]


def test_the_supervisor_serve_becomes_imports_no_django() -> None:
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, runs.cli.supervise; "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'django', 'celery', 'rest_framework', 'simrun_site', 'uvicorn'})))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )

    assert json.loads(imported.stdout) == []


def test_after_a_parent_failed_services_are_started_by_command_line_without_waiting_on_it(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    supervisor = forking_supervisor(
        tmp_path, {"first": STAYS, "second": STAYS}, said, settings_module="no_such_settings"
    )
    supervisor.start()
    try:
        running = {
            name: s.proc is not None and s.proc.poll() is None
            for name, s in supervisor.services.items()
        }
    finally:
        supervisor.stop(grace_s=5, pods_grace_s=1)

    assert running == {"first": True, "second": True}
    assert said[0] == (
        "the services' parent did not become ready: it exited; "
        "starting the first process by its command line"
    )
    assert said[1] == (
        "the services' parent failed less than 60s ago; "
        "starting the second process by its command line"
    )


def test_a_parent_that_answers_nonsense_is_let_go_and_its_socket_closed(tmp_path: Path) -> None:
    parent = ServiceParent(env={}, cwd=tmp_path)
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    theirs.send(b"not json")
    parent.channel, parent.proc = mine, subprocess.Popen(STAYS)
    read, write = os.pipe()
    try:
        with pytest.raises(ParentUnavailable) as refused:
            parent.fork(kind="web", argv=["uvicorn"], out=write)
    finally:
        for fd in (read, write):
            os.close(fd)
        theirs.close()

    assert "an answer of the wrong shape: b'not json'" in str(refused.value)
    assert parent.channel is None and mine.fileno() == -1  # closed, not left open
    assert parent.proc is None  # ended and reaped


def test_letting_go_of_a_parent_that_died_closes_its_socket(tmp_path: Path) -> None:
    parent = ServiceParent(env={}, cwd=tmp_path)
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    parent.channel, parent.proc = mine, ended

    parent.close()
    theirs.close()

    assert parent.channel is None and mine.fileno() == -1


def test_a_forked_service_is_waited_for_until_its_end_or_the_timeout() -> None:
    pid = os.posix_spawn(sys.executable, STAYS, dict(os.environ))
    service = ForkedProcess(pid)

    with pytest.raises(subprocess.TimeoutExpired):
        service.wait(timeout=0.2)
    service.kill()

    assert service.wait(timeout=30) == -signal.SIGKILL
    assert service.poll() == -signal.SIGKILL  # reaped once, kept

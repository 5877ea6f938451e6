"""`simrun serve`: the embedded default's services in the foreground, until Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.commands import ROOT, SIMRUN, clean_env, free_port, kill_all, processes_of
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]


@dataclass
class Serving:
    proc: subprocess.Popen[bytes]
    data_dir: Path
    port: int
    out: Path
    err: Path

    def said(self) -> tuple[str, str]:
        return self.out.read_text(), self.err.read_text()


@contextmanager
def serving(tmp_path: Path) -> Iterator[Serving]:
    """`simrun serve` until it says it serves; afterwards nothing of it is left running."""
    data_dir, port = tmp_path / "simrun", free_port()
    out, err = tmp_path / "serve.out", tmp_path / "serve.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            [str(SIMRUN), "serve", "--port", str(port)],
            cwd=ROOT,
            env=clean_env(data_dir),
            stdout=stdout,
            stderr=stderr,
        )
    try:
        wait_for(lambda: "serving on" in out.read_text(), timeout=120, what="simrun serving")
        yield Serving(proc, data_dir, port, out, err)
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_all(data_dir)


def test_serve_answers_until_ctrl_c_then_leaves_nothing_running(tmp_path: Path) -> None:
    with serving(tmp_path) as served:
        url = f"http://127.0.0.1:{served.port}/healthz"
        with urllib.request.urlopen(url, timeout=10) as reply:
            assert reply.status == 200
        served.proc.send_signal(signal.SIGINT)
        code = served.proc.wait(timeout=60)
        gone = wait_for(lambda: not processes_of(served.data_dir), timeout=30, what="all gone")

    stdout, stderr = served.said()
    assert code == 0, stderr
    assert f"simrun is serving on http://127.0.0.1:{served.port}/" in stdout
    assert gone


def test_serve_stops_and_names_the_service_that_died(tmp_path: Path) -> None:
    with serving(tmp_path) as served:
        watcher = next(p for p in processes_of(served.data_dir) if "watch" in p.cmdline())
        watcher.kill()
        code = served.proc.wait(timeout=60)
        gone = wait_for(lambda: not processes_of(served.data_dir), timeout=30, what="all gone")

    stdout, stderr = served.said()
    assert code == 1, stdout + stderr
    log = served.data_dir / "logs" / "watcher.log"
    assert f"simrun: the watcher process exited with code -9; see {log}" in stderr
    assert gone

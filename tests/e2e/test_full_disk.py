"""A full disk is named as a full disk, and the service goes on by itself once space is back.

These tests put the data directory on a tmpfs of a few MB and fill it: they need to mount one
(root, or CAP_SYS_ADMIN in a container) and are skipped, saying so, where that is refused.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.e2e.commands import ROOT, SIMRUN, clean_env
from tests.e2e.serving import Serving, beat_process, serving, small_workflow, submitted_run
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

DISK_MB = 64
# beat sends a reconcile every second: messages the broker fails to write on the full disk;
# the idle watcher passes each second: a pass slowed by a loaded machine still ends well within
# the short liveness deadline, so a restart here is the full disk's doing or none
MIN_FREE = {
    "SIMRUN_DISK_MIN_FREE_MB": "4",
    "SIMRUN_LIVENESS_S": "8",
    "SIMRUN_BEAT_POLL_S": "1",
    "SIMRUN_IDLE_POLL_S": "1",
}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of DISK_MB mounted under tmp_path, unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m,mode=0700", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"needs to mount a tmpfs (root or CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path, name: str = "filler") -> Path:
    """Write a file until the disk has no byte left; the file."""
    filler = disk / name
    chunk = b"\0" * 1024 * 1024
    with filler.open("wb", buffering=0) as out:
        while True:
            try:
                out.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        with contextlib.suppress(OSError):
            while out.write(b"\0" * 4096):
                pass
    return filler


@contextlib.contextmanager
def kept_full(disk: Path, name: str) -> Iterator[Path]:
    """Fill the disk and, every few milliseconds until the block ends, take whatever the
    services free on it (SQLite deletes its journal when its last connection closes), so a
    check made meanwhile finds it full; the file (removed by the caller)."""
    filler = fill(disk, name)
    done = threading.Event()

    def take() -> None:
        with filler.open("ab", buffering=0) as out:
            while not done.wait(0.005):
                with contextlib.suppress(OSError):  # full again: the next look
                    while out.write(b"\0" * 65536):
                        pass

    taker = threading.Thread(target=take, daemon=True)
    taker.start()
    try:
        yield filler
    finally:
        done.set()
        taker.join(timeout=30)


def api_get(served: Serving, path: str) -> tuple[int, dict[str, object]]:
    token = (served.data_dir / "cli_token").read_text().strip()
    request = urllib.request.Request(
        f"http://127.0.0.1:{served.port}{path}", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def api_post(served: Serving, path: str, body: dict[str, object]) -> tuple[int, dict[str, object]]:
    token = (served.data_dir / "cli_token").read_text().strip()
    request = urllib.request.Request(
        f"http://127.0.0.1:{served.port}{path}",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _controller_late(served: Serving, run_id: str) -> bool:
    """Whether the API's run detail has shown the controller late (it cannot record its
    passes on the full disk) for a few seconds, long enough for `follow`, which polls every
    half second, to see it so: what it used to call "the services are not running"."""
    detail = api_get(served, f"/api/runs/{run_id}/")[1]
    idle, late = detail.get("controller_idle_s"), detail.get("controller_late_s")
    numbers = isinstance(idle, float | int) and isinstance(late, float | int)
    return numbers and idle > late + 3  # type: ignore[operator]


def test_a_full_disk_is_named_everywhere_and_the_run_goes_on_once_freed(
    tmp_path: Path, small_disk: Path
) -> None:
    """With a run computing, the data directory's disk is filled: `status` names the disk as
    full (its path, what simrun needs free), `follow` says so instead of "the services are
    not running" (while the controller, which cannot record its passes, is late), the API's
    run detail carries it, a submission is refused naming it, by the CLI and by the API (507,
    not a 500 whose id is in no log). Once the file is removed the run succeeds, nothing is left
    half-written in the broker's staging directory, and nothing was restarted for it."""
    workflow = small_workflow(tmp_path / "work", units=20, seconds=1.0)
    with serving(tmp_path, env=MIN_FREE, data_dir=small_disk / "simrun") as served:
        run_id = submitted_run(
            served.simrun("submit", str(workflow), "--source", str(workflow.parent / "model"))
        )
        done = served.data_dir / "store" / "runs" / run_id / "tasks" / "naps" / "ledger" / "done"
        wait_for(lambda: done.is_dir() and any(done.iterdir()), timeout=120, what="a unit done")
        with (tmp_path / "follow.out").open("wb") as out:
            follow = subprocess.Popen(
                [str(SIMRUN), "follow", run_id],
                cwd=ROOT,
                env=clean_env(served.data_dir),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        filler = fill(small_disk)
        status = wait_for(
            lambda: (s := served.simrun("status")) and " is full: " in s.stdout and s,
            timeout=60,
            what="status naming the full disk",
        )
        detail_code, detail = api_get(served, f"/api/runs/{run_id}/")
        # what the services free meanwhile (a journal deleted) taken too, as it is freed
        with kept_full(small_disk, "filler-2") as topped:
            refused = served.simrun(
                "submit", str(workflow), "--source", str(workflow.parent / "model")
            )
            said = wait_for(
                lambda: " is full: " in (t := (tmp_path / "follow.out").read_text()) and t,
                timeout=60,
                what="follow naming the full disk",
            )
            posted = api_post(
                served, "/api/runs/", {"workflow": workflow.read_text(), "sources": []}
            )
        topped_again = fill(small_disk, "filler-3")
        # full long enough for the controller to be late and for beat to send (and fail to
        # write) its reconcile messages. The controller's passes fail on the full disk, but
        # SQLite may still find room for a heartbeat in its journal's pages: the watcher and
        # the worker (the two writers of heartbeats) are held meanwhile, so the controller is
        # late whatever SQLite finds (serve judges no silence while a disk is full). Looked
        # at as often as follow looks, which shares the token and its rate limit (faster
        # looks got follow a 429).
        held = _running(served, "watcher", "worker")  # one that exited on the full disk waits
        for proc in held:
            proc.suspend()
        try:
            wait_for(
                lambda: _controller_late(served, run_id),
                timeout=90,
                interval=0.5,
                what="the controller late",
            )
        finally:
            for file in [filler, topped, topped_again]:
                file.unlink()
            for proc in held:
                proc.resume()
        code = follow.wait(timeout=240)
        followed = (tmp_path / "follow.out").read_text()
        broker = served.data_dir / "broker"
        staging = list((broker / "staging").iterdir())
        half_tables = [p.name for p in (broker / "control").iterdir() if p.name.startswith(".")]
        stderr = served.said()[1]

    where = re.escape(str(served.data_dir))
    full = rf"the disk of {where} is full: \S+ free, simrun needs \S+ free"
    assert re.search(full, status.stdout), status.stdout
    assert detail_code == 200, detail
    assert detail["disk"] == {  # type: ignore[comparison-overlap]
        "full": True,
        "path": str(served.data_dir),
        "free_bytes": detail["disk"]["free_bytes"],  # type: ignore[index]
        "needed_bytes": 4 * 1024 * 1024,
    }
    assert refused.returncode != 0
    assert "tell its operator" not in refused.stdout + refused.stderr
    assert re.search(full, refused.stderr), refused.stderr
    assert re.search(full, said), said
    assert posted[0] == 507, posted
    assert posted[1]["code"] == "disk_full" and "id" not in posted[1], posted
    assert re.search(full, str(posted[1]["detail"])), posted
    assert "services are not running" not in followed, followed
    assert code == 0, followed
    assert f"run {run_id} succeeded" in followed
    assert staging == []
    assert half_tables == []
    assert "restarting it" not in stderr, stderr
    assert not os.path.exists(filler)


def _running(served: Serving, *names: str) -> list[psutil.Process]:
    """The processes of those of the services `names` that are running now."""
    found = []
    for name in names:
        with contextlib.suppress(StopIteration, psutil.Error):
            found.append(served.service(name))
    return found


def _waits_for_room_or_gone(served: Serving) -> str | None:
    """What serve said, once it said it waits for room to start a service again, or ended."""
    said = served.said()[1]
    if "once there is room" in said or served.proc.poll() is not None:
        return said or "(serve said nothing)"
    return None


def test_a_service_that_exits_on_a_full_disk_is_started_again_once_there_is_room(
    tmp_path: Path, small_disk: Path
) -> None:
    """Beat exits when it cannot write its schedule on the full disk (at its next send: each
    send is written), the worker when it cannot write its database (and again at each start
    while the disk stays full). serve, set to give up on a service at its second crash, does
    not count those exits: it says the disk is full, starts the service again once space is
    freed, and goes on serving. It used to restart them into the full disk until it gave up
    and stopped everything (the worker's second exit did it here)."""
    env = {"SIMRUN_DISK_MIN_FREE_MB": "4", "SIMRUN_RESTART_BURST": "1", "SIMRUN_BEAT_POLL_S": "1"}
    with serving(tmp_path, env=env, data_dir=small_disk / "simrun") as served:
        wait_for(lambda: beat_process(served.data_dir), timeout=90, what="beat started")
        filler = fill(small_disk)
        # until serve waits for room, or (restarting a service into the full disk) gives up
        exited = wait_for(
            lambda: _waits_for_room_or_gone(served), timeout=120, what="a service's exit"
        )
        filler.unlink()
        beat = wait_for(
            lambda: served.proc.poll() is not None or beat_process(served.data_dir),
            timeout=90,
            what="beat started again (or serve gone)",
        )
        status = served.simrun("status")
        stderr = served.said()[1]

    where = re.escape(str(served.data_dir))
    assert re.search(
        rf"the \w+ process exited with code \d+ while the disk of {where} is full", exited
    )
    assert "not restarting it again" not in stderr, stderr
    assert beat is not True and status.returncode == 0, stderr
    assert re.search(r"^beat +running ", status.stdout, re.M), status.stdout

"""Clients that stop reading a large download, against the web process as the service runs it
(uvicorn on `simrun_site.asgi`): a file's body (and a crate's zip) is sent from the event
loop, so such a client holds its own connection and no request thread, and is cut once it
takes nothing for SIMRUN_SEND_TIMEOUT_S."""

from __future__ import annotations

import hashlib
import os
import select
import socket
from collections.abc import Iterator
from contextlib import ExitStack, closing
from pathlib import Path

import httpx
import pytest

from runs.models import Run
from runs.store import task_paths
from tests import factories
from tests.runs.crates.scenes import finished_scan
from tests.simrun_site.served import Web, web_process
from tests.simrun_site.test_slow_clients import answer, session_of
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

MIB = 1024 * 1024
THREADS = 2  # the request threads of the web process under test
SIZE = 32 * MIB  # far more than the kernel's buffers and uvicorn's hold for a client
ANSWERED_S = 10.0  # what another request may take while the downloads stall: generous
NAME = "big.bin"


@pytest.fixture
def big(store: Path) -> tuple[Run, bytes]:
    """A finished run with an output of SIZE random bytes (its crate is as large); the
    file's bytes."""
    run = finished_scan()
    data = os.urandom(SIZE)
    (task_paths(run.pk, "scan").out / NAME).write_bytes(data)
    return run, data


def output_path(run: Run) -> str:
    return f"runs/{run.pk}/tasks/scan/out/{NAME}"


def requested(web: Web, target: str, *headers: str) -> socket.socket:
    """A GET of `target` on a connection that reads nothing (a small receive buffer)."""
    conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    conn.settimeout(ANSWERED_S)
    conn.connect((web.host, web.port))
    head = [f"GET {target} HTTP/1.1", f"Host: {web.host}", *headers]
    conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    return conn


def head_arrived(conn: socket.socket) -> bool:
    return bool(select.select([conn], [], [], 0)[0])


def holds(web: Web, path: Path) -> bool:
    """Whether the web process has `path` open."""
    fds = Path(f"/proc/{web.pid}/fd")
    targets = []
    for fd in fds.iterdir():
        try:
            targets.append(os.readlink(fd))
        except FileNotFoundError:
            continue
    return str(path) in targets


@pytest.fixture
def web(tmp_path: Path, store: Path) -> Iterator[Web]:
    env = {"SIMRUN_WEB_THREADS": str(THREADS), "SIMRUN_SEND_TIMEOUT_S": "600"}
    with web_process(tmp_path / "web", env) as served:
        yield served


def test_downloads_nobody_reads_leave_every_other_request_answered(
    web: Web, big: tuple[Run, bytes]
) -> None:
    """Three times as many stalled downloads as request threads (the API's output download,
    the pages' one, the crate zip): each gets its answer's head, and /healthz and another
    identity's API call are answered; a stalled download read at last is whole."""
    run, data = big
    paul = factories.person()
    bearer = f"Authorization: Bearer {factories.token(paul).secret}"
    cookie = f"Cookie: sessionid={session_of(paul.name)}"
    targets = [
        (f"/api/runs/{run.pk}/outputs/download/?path={output_path(run)}", bearer),
        (f"/runs/{run.pk}/files/tasks/scan/out/{NAME}", cookie),
        (f"/api/runs/{run.pk}/crate/", bearer),
    ]
    other = f"Bearer {factories.token(factories.person()).secret}"
    with ExitStack() as stack:
        conns = [
            stack.enter_context(closing(requested(web, target, header)))
            for target, header in targets * THREADS
        ]
        wait_for(
            lambda: all(head_arrived(c) for c in conns),
            timeout=ANSWERED_S,
            what="the head of every stalled download",
        )
        with httpx.Client(base_url=web.url, timeout=ANSWERED_S) as http:
            assert http.get("/healthz").status_code == 200
            listed = http.get("/api/runs/", headers={"Authorization": other})
            assert listed.status_code == 200
        status, headers, body = answer(conns[0])
    assert status == 200
    assert headers["content-length"] == str(SIZE)
    assert headers["content-type"] == "application/octet-stream"
    assert hashlib.sha256(body).digest() == hashlib.sha256(data).digest()


def test_a_download_not_read_for_the_send_timeout_is_cut_and_its_file_closed(
    tmp_path: Path, big: tuple[Run, bytes]
) -> None:
    """A client that takes no byte for SIMRUN_SEND_TIMEOUT_S: its connection is closed
    before the file was sent, and the web process holds the file no more."""
    run, _ = big
    bearer = f"Authorization: Bearer {factories.token(factories.person()).secret}"
    target = f"/api/runs/{run.pk}/outputs/download/?path={output_path(run)}"
    file = task_paths(run.pk, "scan").out / NAME
    with web_process(tmp_path / "web", {"SIMRUN_SEND_TIMEOUT_S": "0.5"}) as web:
        with closing(requested(web, target, bearer)) as conn:
            wait_for(lambda: head_arrived(conn), what="the download's head")
            wait_for(lambda: not holds(web, file), what="the file closed")
            received = 0
            try:
                while chunk := conn.recv(MIB):
                    received += len(chunk)
            except ConnectionResetError:
                pass  # cut: what was on its way may be lost
        assert received < SIZE

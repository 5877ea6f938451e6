"""Slow and greedy clients against the web process as the service runs it (uvicorn on
`simrun_site.asgi`): a request body is read whole, within its deadline and its size limit,
in the event loop, before a request thread or a database connection is taken."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, closing
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.test import Client

from tests import factories
from tests.simrun_site.served import Web, web_process
from tests.waiting import DEADLINE_S, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

MIB = 1024 * 1024
THREADS = 2  # the request threads of the web process under test


@pytest.fixture
def web(tmp_path: Path, store: Path) -> Iterator[Web]:
    """A web process of two request threads; a body gets a deadline no test step reaches."""
    env = {"SIMRUN_WEB_THREADS": str(THREADS), "SIMRUN_BODY_TIMEOUT_S": str(DEADLINE_S * 4)}
    with web_process(tmp_path / "web", env) as served:
        yield served


@pytest.fixture
def token() -> str:
    return factories.token(factories.person()).secret


def stalled(
    web: Web, path: str, *headers: str, length: int = 1000, sent: bytes = b""
) -> socket.socket:
    """A connection that announces a body of `length` bytes, sends `sent` of it and stops."""
    sent = sent or b"workflow=a&b="
    conn = socket.create_connection((web.host, web.port), timeout=DEADLINE_S)
    head = [f"POST {path} HTTP/1.1", f"Host: {web.host}", f"Content-Length: {length}", *headers]
    conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + sent)
    return conn


def answer(conn: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of the answer on a raw connection (closed by the server
    or sized by Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise AssertionError(f"the connection closed without an answer: {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "-1"))
    while length < 0 or len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), headers, body


def test_stalled_bodies_leave_every_other_request_answered(web: Web, token: str) -> None:
    """Six times as many stalled bodies as request threads, half anonymous (the login form),
    half with a token (the API): pages and API calls of others are still answered."""
    bearer = f"Authorization: Bearer {token}"
    with ExitStack() as stack:
        for _ in range(THREADS * 3):
            stack.enter_context(closing(stalled(web, "/login/")))
            stack.enter_context(
                closing(stalled(web, "/api/validate/", bearer, "Content-Type: application/json"))
            )
        with httpx.Client(base_url=web.url, timeout=DEADLINE_S) as http:
            assert http.get("/login/").status_code == 200
            listed = http.get("/api/runs/", headers={"Authorization": f"Bearer {token}"})
            assert listed.status_code == 200
            checked = http.post(
                "/api/validate/",
                json={"workflow": "name: x\ntasks: []\n"},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert checked.status_code in (200, 400), checked.text


def test_a_body_not_sent_within_its_deadline_is_408_in_json(
    tmp_path: Path, store: Path, token: str
) -> None:
    """A body still incomplete at SIMRUN_BODY_TIMEOUT_S: 408 in the API's error shape, naming
    the setting, and the connection is closed."""
    with web_process(tmp_path / "web", {"SIMRUN_BODY_TIMEOUT_S": "0.5"}) as web:
        bearer = f"Authorization: Bearer {token}"
        json_body = "Content-Type: application/json"
        with closing(stalled(web, "/api/validate/", bearer, json_body, sent=b'{"work')) as conn:
            status, headers, body = answer(conn)
        assert status == 408
        assert headers["content-type"] == "application/json"
        error = json.loads(body)
        assert error["code"] == "body_timeout"
        assert "SIMRUN_BODY_TIMEOUT_S" in error["detail"]


def test_an_upload_trickled_below_its_minimum_rate_is_408_in_json(
    tmp_path: Path, store: Path, token: str
) -> None:
    """A snapshot upload that sends a byte every 0.2 s, each well within the longest pause
    (SIMRUN_BODY_TIMEOUT_S), held its connection for as long as it went on: once the pause
    has passed it is 408 in JSON, naming the minimum rate it kept below."""
    env = {"SIMRUN_BODY_TIMEOUT_S": "0.5", "SIMRUN_UPLOAD_MIN_BYTES_PER_S": "1024"}
    with web_process(tmp_path / "web", env) as web:
        bearer = f"Authorization: Bearer {token}"
        conn = stalled(web, "/api/snapshots/?name=slow", bearer, length=100_000, sent=b"\x1f")
        with closing(conn):
            trickled = time.monotonic() + DEADLINE_S / 3
            while not select.select([conn], [], [], 0.2)[0]:  # the trickle's pace
                assert time.monotonic() < trickled, "still trickling, unanswered"
                conn.sendall(b"\0")
            status, headers, body = answer(conn)
    assert status == 408
    assert headers["content-type"] == "application/json"
    error = json.loads(body)
    assert error["code"] == "body_timeout"
    assert "SIMRUN_UPLOAD_MIN_BYTES_PER_S" in error["detail"]


def test_an_anonymous_form_of_300_mib_is_refused_before_its_body_is_read(web: Web) -> None:
    """The login page's form posted by someone not logged in, announcing 300 MiB: 413 in
    JSON at once, naming the limit for anonymous requests; none of the body is awaited."""
    boundary = "x" * 16
    first = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\n'
    ).encode() + b"\0" * 4096
    conn = stalled(
        web,
        "/login/",
        f"Content-Type: multipart/form-data; boundary={boundary}",
        "Cookie: csrftoken=abcdefghijklmnopqrstuvwxyzABCDEF",
        length=300 * MIB,
        sent=first,
    )
    with closing(conn):
        status, headers, body = answer(conn)
    assert status == 413
    assert headers["content-type"] == "application/json"
    assert "SIMRUN_ANONYMOUS_MAX_BYTES" in json.loads(body)["detail"]
    assert list(web.tmp.iterdir()) == []  # nothing spooled


def session_of(name: str) -> str:
    """The session cookie of someone logged in (a committed session row)."""
    client = Client()
    assert client.login(username=name, password=f"{name}-pw-123")
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def test_a_logged_in_form_over_the_page_limit_is_refused_before_its_body_is_read(
    web: Web,
) -> None:
    """A page form of someone logged in gets the pages' limit (SIMRUN_FORM_MAX_BYTES), not
    the API's or an upload's: 413 at once for 300 MiB."""
    session = session_of(factories.person().name)
    conn = stalled(
        web,
        "/submit/",
        "Content-Type: multipart/form-data; boundary=xxxx",
        f"Cookie: sessionid={session}; csrftoken=abcdefghijklmnopqrstuvwxyzABCDEF",
        length=300 * MIB,
        sent=b"--xxxx\r\n",
    )
    with closing(conn):
        status, _, body = answer(conn)
    assert status == 413
    assert "SIMRUN_FORM_MAX_BYTES" in json.loads(body)["detail"]


def test_a_made_up_session_cookie_buys_no_bigger_body(web: Web) -> None:
    """A cookie that is no logged-in user's session counts as none: the anonymous limit."""
    conn = stalled(
        web,
        "/submit/",
        "Content-Type: multipart/form-data; boundary=xxxx",
        "Cookie: sessionid=madeup; csrftoken=abcdefghijklmnopqrstuvwxyzABCDEF",
        length=1 * MIB,
        sent=b"--xxxx\r\n",
    )
    with closing(conn):
        status, _, body = answer(conn)
    assert status == 413
    assert "SIMRUN_ANONYMOUS_MAX_BYTES" in json.loads(body)["detail"]


def test_a_request_head_not_sent_within_its_deadline_is_408_and_closed(
    tmp_path: Path, store: Path
) -> None:
    """Part of a request head, then nothing (uvicorn alone waits for ever): 408 in JSON at
    SIMRUN_HEADER_TIMEOUT_S, naming it, and the connection closed."""
    with web_process(tmp_path / "web", {"SIMRUN_HEADER_TIMEOUT_S": "0.5"}) as web:
        conn = socket.create_connection((web.host, web.port), timeout=DEADLINE_S)
        with closing(conn):
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            status, _, body = answer(conn)
            assert conn.recv(1) == b""  # closed
        assert status == 408
        assert "SIMRUN_HEADER_TIMEOUT_S" in json.loads(body)["detail"]


def test_a_connection_that_sends_nothing_is_closed_at_the_head_deadline(
    tmp_path: Path, store: Path
) -> None:
    with web_process(tmp_path / "web", {"SIMRUN_HEADER_TIMEOUT_S": "0.5"}) as web:
        conn = socket.create_connection((web.host, web.port), timeout=DEADLINE_S)
        with closing(conn):
            assert conn.recv(1) == b""  # closed, without an answer nobody asked for


def test_requests_beyond_the_connection_limit_are_answered_503(tmp_path: Path, store: Path) -> None:
    """SIMRUN_WEB_MAX_CONNECTIONS open connections: the next request is refused at once by
    uvicorn (503) instead of waiting, and answered again once they close."""
    env = {"SIMRUN_WEB_MAX_CONNECTIONS": "10", "SIMRUN_HEADER_TIMEOUT_S": str(DEADLINE_S * 4)}
    with web_process(tmp_path / "web", env) as web:
        with ExitStack() as stack:
            for _ in range(10):
                stack.enter_context(closing(socket.create_connection((web.host, web.port))))
            assert httpx.get(f"{web.url}/healthz", timeout=DEADLINE_S).status_code == 503
        wait_for(lambda: _healthy(web), what="an answer once the connections closed")


def _healthy(web: Web) -> bool:
    return httpx.get(f"{web.url}/healthz", timeout=DEADLINE_S).status_code == 200

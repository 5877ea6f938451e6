"""The web process's application: requests (streams too) to Django's WSGI handler, uploads to
its ASGI one."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Any, cast

import pytest
from a2wsgi import WSGIMiddleware

from runs.edge.upload_limit import App, Receive, Scope, Send
from simrun_site.dispatch import Dispatch


def scope(path: str, method: str = "GET") -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }


async def call(app: Any, path: str) -> int:
    """One GET through an ASGI app; the status it answers."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    await app(scope(path), receive, send)
    return int(next(m["status"] for m in sent if m["type"] == "http.response.start"))


class Recorder:
    """An ASGI app that notes the paths it served and answers 200."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.paths.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.mark.parametrize(
    ("path", "to_async"),
    [
        ("/api/runs/r1/events/", False),
        ("/api/runs/r1/logs/", False),
        ("/api/snapshots/", True),
        ("/api/runs/from_crate/", True),
        ("/api/runs/", False),
        ("/api/runs/r1/", False),
        ("/api/runs/r1/outputs/download/", False),
        ("/api/snapshots/abc/", False),
        ("/runs/r1/", False),
        ("/events/", False),
        ("/runs/r1/events/", False),
        ("/runs/r1/tasks/scan/logs/scan-w0/events/", False),
        ("/runs/r1/tasks/scan/logs/scan-w0/", False),
        ("/healthz", False),
    ],
)
def test_uploads_go_to_the_async_handler_the_rest_to_the_sync_one(
    path: str, to_async: bool
) -> None:
    sync_app, async_app = Recorder(), Recorder()
    app = Dispatch(sync_app=sync_app, async_app=async_app)
    assert asyncio.run(call(app, path)) == 200
    assert (async_app.paths, sync_app.paths) == (([path], []) if to_async else ([], [path]))


def test_requests_run_at_the_same_time_on_the_threads() -> None:
    """A slow request does not hold up the others: the first waits for the second to arrive,
    which can only happen if they run side by side."""
    second_arrived = threading.Event()

    def wsgi(environ: Any, start_response: Any) -> Iterable[bytes]:
        if environ["PATH_INFO"] == "/first":
            status = "200 OK" if second_arrived.wait(timeout=30) else "504 Gateway Timeout"
        else:
            second_arrived.set()
            status = "200 OK"
        start_response(status, [])
        return [b""]

    app = Dispatch(sync_app=cast(App, WSGIMiddleware(wsgi, workers=4)), async_app=Recorder())

    async def both() -> list[int]:
        return list(await asyncio.gather(call(app, "/first"), call(app, "/second")))

    assert asyncio.run(both()) == [200, 200]

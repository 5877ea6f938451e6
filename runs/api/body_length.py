"""An ASGI wrapper that gives a chunked request body its length before the WSGI side sees it.

Django's WSGI handler reads a body only up to CONTENT_LENGTH, so a body sent with
`Transfer-Encoding: chunked` and no length would reach a view as an empty one. In front of
the WSGI side of the web process (simrun_site/dispatch.py) this wrapper reads such a body as it
arrives, at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes of it (beyond: 413 in JSON, the rest is not
read), and passes the request on with a Content-Length, the body replayed from memory.
Requests with a length, or without a body, pass untouched.
"""

from __future__ import annotations

import json

from django.conf import settings

from runs.api.upload_limit import App, Message, Receive, Scope, Send


def json_answer(status: int, code: str, detail: str) -> tuple[Message, Message]:
    """The two ASGI messages of an answer in the API's error shape; the connection closes."""
    body = json.dumps({"detail": detail, "code": code}).encode()
    start = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ],
    }
    return start, {"type": "http.response.body", "body": body}


class ChunkedBodyLength:
    """Wraps an ASGI app: a chunked body is read (bounded) and given a Content-Length."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = list(scope.get("headers") or [])
        names = {name.lower() for name, _ in headers}
        if (
            scope["type"] != "http"
            or b"transfer-encoding" not in names
            or b"content-length" in names
        ):
            await self.app(scope, receive, send)
            return
        limit = int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client went away: nobody to answer
            size += len(message.get("body", b""))
            if size > limit:
                for answer in json_answer(
                    413,
                    "too_large",
                    f"the body is larger than the limit of {limit} bytes "
                    "(DATA_UPLOAD_MAX_MEMORY_SIZE)",
                ):
                    await send(answer)
                return
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(parts)
        kept = [(n, v) for n, v in headers if n.lower() != b"transfer-encoding"]
        sized = {**scope, "headers": [*kept, (b"content-length", str(len(body)).encode())]}
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(sized, replay, send)

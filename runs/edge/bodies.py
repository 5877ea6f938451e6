"""Request bodies read whole, in the event loop, before a request thread is taken.

A request thread (the WSGI side's pool, `simrun_site.dispatch`) that waits for a client's body
waits at the client's pace: a dozen clients that announce a body and send nothing held every
thread, and nobody else was answered. So this wrapper, in front of everything, reads a body
completely first, within

- a deadline: SIMRUN_BODY_TIMEOUT_S for the whole body (beyond it: 408, in JSON);
- a limit: the API's bodies DATA_UPLOAD_MAX_MEMORY_SIZE, the pages' forms
  SIMRUN_FORM_MAX_BYTES, and a request without a valid credential (no token, no session of
  a logged-in user) SIMRUN_ANONYMOUS_MAX_BYTES, whatever its path (beyond: 413, in JSON, at
  once when the announced length is too large, else as soon as the body passes it);

then passes the request on with its body replayed from memory and a Content-Length (a chunked
body gets one: Django's WSGI handler reads only up to it). Nothing of a body is spooled to disk
before it is accepted. A credential is looked at only for a body larger than the anonymous
limit: in this process's memory first (`runs.token_checks`), else in the database on a reader
thread (`runs.edge.readers`), so a made-up token or cookie buys no bigger body.

Uploads of snapshots (UPLOAD_PATHS) are not held in memory: they stream on to Django's ASGI
handler, which spools them in the event loop without a thread, cut at their own limit
(`runs.edge.upload_limit`); here they get the anonymous limit without a credential,
SIMRUN_BODY_TIMEOUT_S as the longest pause between two parts of the body, and a minimum
rate: once SIMRUN_BODY_TIMEOUT_S has passed, the bytes received keep up with
SIMRUN_UPLOAD_MIN_BYTES_PER_S on average since the body began, so a body of n bytes is
whole within SIMRUN_BODY_TIMEOUT_S + n / SIMRUN_UPLOAD_MIN_BYTES_PER_S (beyond: 408). A
client trickling a byte at a time holds its connection for that long at most.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from django.conf import settings
from django.http import parse_cookie

from runs.edge.readers import read
from runs.edge.upload_limit import UPLOAD_PATHS, App, Message, Receive, Scope, Send
from runs.selectors.credentials import session_identity, token_identity
from runs.services.identities import hash_token
from runs.token_checks import token_checks


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


async def answer(send: Send, status: int, code: str, detail: str) -> None:
    for message in json_answer(status, code, detail):
        await send(message)


@dataclass(frozen=True)
class Limit:
    bytes: int
    setting: str


@dataclass(frozen=True)
class Credential:
    """What a request presents to say who sent it (not yet checked)."""

    token: str | None
    session: str | None

    @classmethod
    def of(cls, headers: dict[bytes, bytes]) -> Credential:
        scheme, _, secret = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        token = secret.strip() if scheme.lower() == "bearer" and secret.strip() else None
        cookies = parse_cookie(headers.get(b"cookie", b"").decode("latin-1"))
        return cls(token, cookies.get(settings.SESSION_COOKIE_NAME) or None)

    @property
    def presented(self) -> bool:
        return self.token is not None or self.session is not None

    async def valid(self) -> bool:
        """Whether the token is active or the session is a logged-in user's."""
        if self.token is not None:
            token_hash = hash_token(self.token)
            if token_checks.fresh(token_hash, max_age_s=settings.SIMRUN_TOKEN_RECHECK_S):
                return True
            if await read(token_identity, token_hash=token_hash) is not None:
                return True
        if self.session is not None:
            return await read(session_identity, session_key=self.session) is not None
        return False


def path_limit(path: str) -> Limit:
    """The limit of a body sent with a valid credential to `path`."""
    if path in UPLOAD_PATHS:  # streamed on, spooled and cut at their own limit
        return Limit(int(settings.SIMRUN_MAX_UPLOAD_BYTES), "SIMRUN_MAX_UPLOAD_BYTES")
    if path.startswith("/api/"):
        return Limit(int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE), "DATA_UPLOAD_MAX_MEMORY_SIZE")
    return Limit(int(settings.SIMRUN_FORM_MAX_BYTES), "SIMRUN_FORM_MAX_BYTES")


def anonymous_limit(path: str) -> Limit:
    limit = path_limit(path)
    anonymous = int(settings.SIMRUN_ANONYMOUS_MAX_BYTES)
    return Limit(anonymous, "SIMRUN_ANONYMOUS_MAX_BYTES") if anonymous < limit.bytes else limit


def too_large(limit: Limit, *, anonymous: bool) -> str:
    who = "without a valid token or session" if anonymous else "to this path"
    return f"the body is larger than the limit of {limit.bytes} bytes {who} ({limit.setting})"


def timed_out(seconds: float) -> str:
    return (
        f"the request body did not arrive within {seconds:g} s (SIMRUN_BODY_TIMEOUT_S); "
        "send it at once, with its Content-Length"
    )


def too_slow(rate: int, grace: float) -> str:
    return (
        f"the upload arrived slower than {rate} bytes a second on average after its first "
        f"{grace:g} s (SIMRUN_UPLOAD_MIN_BYTES_PER_S, SIMRUN_BODY_TIMEOUT_S)"
    )


class BodyFirst:
    """Wraps an ASGI app: a request reaches it with its whole body (see the module)."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.lower(): value for name, value in scope.get("headers") or []}
        chunked = b"transfer-encoding" in headers and b"content-length" not in headers
        text = headers.get(b"content-length", b"").decode("latin-1").strip()
        length = int(text) if text.isdigit() else None
        if not chunked and not length:
            await self.app(scope, receive, send)  # no body to wait for
            return
        path = scope.get("path", "")
        limit = await self._limit(path, Credential.of(headers), length, chunked)
        if length is not None and length > limit.bytes:
            anonymous = limit.setting == "SIMRUN_ANONYMOUS_MAX_BYTES"
            await answer(send, 413, "too_large", too_large(limit, anonymous=anonymous))
            return
        if scope.get("method") == "POST" and path in UPLOAD_PATHS:
            await self.app(scope, paced(receive, send), send)
            return
        body = await read_body(receive, send, limit)
        if body is None:
            return  # answered, or the client went away
        kept = [(n, v) for n, v in scope["headers"] if n.lower() not in SIZE_HEADERS]
        sized = {**scope, "headers": [*kept, (b"content-length", str(len(body)).encode())]}
        await self.app(sized, replay(body, receive), send)

    async def _limit(
        self, path: str, credential: Credential, length: int | None, chunked: bool
    ) -> Limit:
        """The limit of this body: the anonymous one unless a valid credential comes with a
        body that may be larger (a credential is checked only then)."""
        anonymous = anonymous_limit(path)
        larger = chunked or (length is not None and length > anonymous.bytes)
        if credential.presented and larger and await credential.valid():
            return path_limit(path)
        return anonymous


SIZE_HEADERS = (b"content-length", b"transfer-encoding")


async def read_body(receive: Receive, send: Send, limit: Limit) -> bytes | None:
    """The whole body within the deadline and the limit; None once answered (408, 413) or
    when the client went away."""
    seconds = float(settings.SIMRUN_BODY_TIMEOUT_S)
    parts: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(seconds):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                part = message.get("body", b"")
                size += len(part)
                if size > limit.bytes:
                    anonymous = limit.setting == "SIMRUN_ANONYMOUS_MAX_BYTES"
                    await answer(send, 413, "too_large", too_large(limit, anonymous=anonymous))
                    return None
                parts.append(part)
                if not message.get("more_body", False):
                    return b"".join(parts)
    except TimeoutError:
        await answer(send, 408, "body_timeout", timed_out(seconds))
        return None


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the body read, then what the client does next (its going away)."""
    given = False

    async def again() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


def paced(receive: Receive, send: Send) -> Receive:
    """A receive for an upload: a pause longer than SIMRUN_BODY_TIMEOUT_S between two parts,
    or a body behind its minimum rate (see the module), ends it (408; the app sees the client
    go away)."""
    seconds = float(settings.SIMRUN_BODY_TIMEOUT_S)
    rate = int(settings.SIMRUN_UPLOAD_MIN_BYTES_PER_S)
    loop = asyncio.get_running_loop()
    began = loop.time()
    received = 0
    done = False

    async def timed() -> Message:
        nonlocal done, received
        if done:
            return await receive()
        pause = loop.time() + seconds
        behind = began + seconds + received / rate  # when the average falls below the rate
        try:
            async with asyncio.timeout_at(min(pause, behind)):
                message = await receive()
        except TimeoutError:
            done = True
            why = timed_out(seconds) if pause <= behind else too_slow(rate, seconds)
            await answer(send, 408, "body_timeout", why)
            return {"type": "http.disconnect"}
        received += len(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body", False):
            done = True
        return message

    return timed

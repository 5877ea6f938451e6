"""The web process's ASGI application: Django's WSGI handler for requests, its ASGI handler
for uploads, and the edge in front of both.

Through Django's ASGI handler a request hops between the event loop and a worker thread twice
for every middleware (`MiddlewareMixin` runs `process_request` and `process_response` through
`sync_to_async`): about 30 hops with ours, 4-7 ms for a trivial request on a 2-core machine.
Through the WSGI handler it makes one hop and runs the whole stack in that thread: 0.5-1.5 ms.
So every request goes to the WSGI handler (a2wsgi's `WSGIMiddleware`, on a pool of
SIMRUN_WEB_THREADS threads; the database pool has SIMRUN_WEB_READERS connections more)
except the uploads of `ASYNC_PATHS` (snapshots, crates), which Django's ASGI handler spools in
the event loop. Django's ASGI handler would also hold a thread for each of its requests until its
response ends (its `ThreadSensitiveContext`), so the streams (a run's events, the pages' live
parts, logs followed) go to the WSGI side too: their views answer with a first part and hand
the rest over to the event loop, which sends it without a thread (`runs.edge.streams`).
In front of everything, every request body is read whole in the event loop, within its
deadline and limit, before a thread is taken (`runs.edge.bodies`).
"""

from __future__ import annotations

import re
from typing import Any, cast

from a2wsgi import WSGIMiddleware
from django.conf import settings
from django.core.asgi import get_asgi_application
from django.core.wsgi import get_wsgi_application

from runs.edge.upload_limit import App, Receive, Scope, Send, UploadSizeLimit

ASYNC_PATHS = re.compile(r"^/api/(snapshots|runs/from_crate)/$")
"""Paths served by the ASGI handler: uploads (snapshots, crates to run again), whose body the
upload limit cuts as it arrives (`runs.edge.upload_limit`): Django's ASGI handler then answers
413, where a WSGI view would take the cut body for a short archive and answer first."""


class Dispatch:
    """Uploads to the async app, everything else to the sync one."""

    def __init__(self, *, sync_app: App, async_app: App) -> None:
        self.sync_app = sync_app
        self.async_app = async_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or ASYNC_PATHS.match(scope["path"]):
            await self.async_app(scope, receive, send)
            return
        await self.sync_app(scope, receive, send)


def build_application() -> App:
    """The ASGI application of the web process (Django must be set up, or settings known)."""
    # Django's and a2wsgi's message types are narrower than ours; the protocol is the same.
    async_app = cast(App, get_asgi_application())
    handler: Any = get_wsgi_application()  # its response is the iterable of bytes WSGI wants
    from runs.edge.bodies import BodyFirst  # reads models: once Django is set up
    from runs.edge.streams import StreamHandover

    wsgi = cast(App, WSGIMiddleware(handler, workers=settings.SIMRUN_WEB_THREADS))
    sync_app = StreamHandover(wsgi)
    return BodyFirst(UploadSizeLimit(Dispatch(sync_app=sync_app, async_app=async_app)))

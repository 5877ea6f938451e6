"""The API served for real: uvicorn on 127.0.0.1 in a thread, the same application and HTTP
protocol as the web process (`simrun_site.dispatch`, `simrun_site.web_protocol`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from django.db import connections

from simrun_site.dispatch import build_application
from simrun_site.web_protocol import WebProtocol
from tests.waiting import wait_for

GRACE_S = 1


@contextmanager
def serving(*, pool_size: int = 0) -> Iterator[str]:
    """Serve the API until the block ends; yields its base URL.

    The test database must hold committed rows (`django_db(transaction=True)`): the server's
    threads have connections of their own. They close after every request (CONN_MAX_AGE 0),
    so none is left open when the test database is flushed or dropped. With `pool_size` they
    come from a pool of that many, as in the service (`SIMRUN_DB_POOL`), which waits at most
    5 s for a free connection.
    """
    database = connections.settings["default"]
    kept_age = database.get("CONN_MAX_AGE", 0)
    database["CONN_MAX_AGE"] = 0
    if pool_size:
        database["OPTIONS"]["pool"] = {"min_size": 1, "max_size": pool_size, "timeout": 5}
    app = build_application()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan="off",
        http=WebProtocol,
        # a stream still open at the end (a page's, until its maximum time) is cancelled,
        # not waited for: the test is over
        timeout_graceful_shutdown=GRACE_S,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=20, what="uvicorn to start")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        database["CONN_MAX_AGE"] = kept_age
        if pool_size:
            connections["default"].close_pool()
            del database["OPTIONS"]["pool"]

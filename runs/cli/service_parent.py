"""The parent of serve's services: one process imports what they share, and forks them.

Started by serve (`runs/cli/forked.py`), it sets Django up, imports Django, Celery, uvicorn and
the project's modules, freezes its objects for the collector (`gc.freeze`: a collection then
never writes to their pages, so the services keep sharing them) and waits on its socket. Each
request names a service and carries the descriptor its output goes to; the parent forks
twice, so the service, once the middle process has exited, is a child of serve (the child
subreaper) like a service serve starts itself: serve reaps it, signals it, restarts it. The
service then runs its command's entry point in-process instead of `exec`-ing it. Each service
still holds its own pages once it writes them; what it only reads of the parent's imports it
shares with the others, which is most of ~50 MB a process.

The parent runs one thread, so no lock is held by another thread at a fork. It ends when serve
closes its socket, or with serve (a parent-death signal, as each service).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
ADOPTION_WAIT_S = 10.0  # how long a forked service waits to become serve's child
REQUEST_MAX_BYTES = 64 * 1024

# What the services import as they start, imported once here (each is optional: a module a
# version does not have is skipped, and the service imports what it needs itself).
SHARED_MODULES = (
    "celery.bin.celery",
    "celery.apps.worker",
    "celery.apps.beat",
    "celery.beat",
    "celery.worker.consumer.consumer",
    "celery.concurrency.thread",
    "kombu.transport.redis",
    "simrun_site.file_broker",
    "simrun_site.broker_doorbell",
    "runs.tasks",
    "runs.controller.watcher",
    "uvicorn.main",
    "uvicorn.server",
    "uvicorn.lifespan.on",
    "uvicorn.loops.asyncio",
    "simrun_site.web_protocol",
    "simrun_site.dispatch",
    "a2wsgi",
    "django.core.handlers.asgi",
    "django.core.handlers.wsgi",
    "django.core.management",
)


def main(argv: list[str]) -> int:
    """`python -m runs.cli.service_parent FD SERVE_PID [ROOM]`: serve serve's requests on the
    socket FD until it closes (ROOM only lengthens this command line, so that a service's
    title fits in it: `setproctitle` leaves the environment where it is)."""
    channel = socket.socket(fileno=int(argv[1]))
    serve_pid = int(argv[2])
    warm()
    if threading.active_count() != 1:
        _send(channel, {"error": f"{threading.active_count()} threads after the imports"})
        return 1
    _send(channel, {"ready": True, "pid": os.getpid()})
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(channel, REQUEST_MAX_BYTES, 1)
        except OSError:
            return 0
        if not message:  # serve closed its end: it is stopping, or gone
            return 0
        try:
            request = json.loads(message)
            if len(fds) != 1:
                raise ValueError("a request carries one descriptor, the service's output")
            pid = spawn(request, out=fds[0], serve_pid=serve_pid, channel=channel)
            _send(channel, {"pid": pid})
        except Exception as exc:  # the request fails, the parent goes on
            _send(channel, {"error": f"{type(exc).__name__}: {exc}"})
        finally:
            for fd in fds:
                os.close(fd)


def warm() -> None:
    """Set Django up and import what the services share; then freeze it for the collector."""
    from runs.cli.base import setup_django

    setup_django()
    for name in SHARED_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    from django.db import connections
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - imports every view, which web then shares
    connections.close_all()
    gc.collect()
    gc.freeze()


def spawn(request: dict[str, object], *, out: int, serve_pid: int, channel: socket.socket) -> int:
    """Fork the service `request` names (its `kind`, `argv` and `cwd`) writing to `out`, as
    a grandchild adopted by serve; its pid. The middle process only forks and exits."""
    kind, argv, cwd = request["kind"], request["argv"], request["cwd"]
    if kind not in RUNNERS or not isinstance(argv, list) or not isinstance(cwd, str):
        raise ValueError(f"no such service to fork: {kind!r}")
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    middle = os.fork()
    if middle == 0:  # pragma: no cover - the middle process; its exit is checked by serve
        code = 1
        try:
            os.close(read)
            service = os.fork()
            if service == 0:
                os.close(write)
                _become(str(kind), [str(a) for a in argv], cwd, out, serve_pid, channel)
            os.write(write, str(service).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        pid = answer.read()
    os.waitpid(middle, 0)
    if not pid:
        raise RuntimeError("the middle process exited before forking the service")
    return int(pid)


def _become(  # pragma: no cover - runs in the forked service
    kind: str, argv: list[str], cwd: str, out: int, serve_pid: int, channel: socket.socket
) -> None:
    """Turn this fork into the service: its own session, output and signals, a child of
    serve that dies with it; then its entry point. Never returns."""
    code: int = 1
    try:
        channel.close()
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        if not _adopted_by(serve_pid):
            os._exit(1)
        os.chdir(cwd)
        _set_title(" ".join(argv))
        sys.argv = list(argv)
        code = _exit_code(RUNNERS[kind])
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _adopted_by(serve_pid: int) -> bool:
    """Wait for the middle process's exit to make serve this process's parent, then die with
    serve (the signal is armed only then: the middle's exit would send it)."""
    deadline = time.monotonic() + ADOPTION_WAIT_S
    while os.getppid() != serve_pid:
        if os.getppid() == 1 or time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    with contextlib.suppress(AttributeError, OSError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    return os.getppid() == serve_pid  # serve did not die before the signal was armed


def _set_title(title: str) -> None:
    """The service's command line as `ps` and /proc show it (the parent's otherwise)."""
    with contextlib.suppress(ImportError):
        import setproctitle

        setproctitle.setproctitle(title)


def _exit_code(run: Callable[[], object]) -> int:
    try:
        result = run()
    except SystemExit as exc:
        result = exc.code
    if result is None:
        return 0
    return result if isinstance(result, int) else 1


def _web() -> object:  # pragma: no cover - runs in the forked service
    """uvicorn, as its console script runs it; the web process's database pool first (its
    ASGI module sets the variable before the settings are read; here they were read)."""
    os.environ.setdefault("SIMRUN_DB_POOL", "true")
    from django.conf import settings

    from simrun_site.settings import default_database

    settings.DATABASES["default"].update(default_database())
    from uvicorn.main import main as uvicorn

    return uvicorn()


def _celery() -> object:  # pragma: no cover - runs in the forked service
    from celery.__main__ import main as celery

    return celery()


def _manage() -> object:  # pragma: no cover - runs in the forked service
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv[1:])  # `python manage.py …`: the script is the program
    return 0


RUNNERS: dict[str, Callable[[], object]] = {
    "web": _web,
    "worker": _celery,
    "beat": _celery,
    "watcher": _manage,
}


def _send(channel: socket.socket, message: dict[str, object]) -> None:
    channel.sendall(json.dumps(message).encode())


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The port `simrun serve` takes: the one asked for while it can be bound as the web server
binds it (SO_REUSEADDR), the next free one otherwise."""

from __future__ import annotations

import errno
import socket

import pytest

from runs.cli.service_commands import serve_port


def _port_in_time_wait() -> int:
    """A port no one listens on whose last connection, accepted by a server that bound it
    as uvicorn does (SO_REUSEADDR), is in TIME_WAIT on the server's side."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = int(listener.getsockname()[1])
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    accepted.close()  # the server's side closes first: its end waits in TIME_WAIT
    client.recv(1)
    client.close()
    listener.close()
    return port


def test_a_port_whose_connections_are_in_time_wait_is_taken() -> None:
    port = _port_in_time_wait()
    with socket.socket() as plain, pytest.raises(OSError) as refused:
        plain.bind(("127.0.0.1", port))  # what a bind without SO_REUSEADDR meets
    assert refused.value.errno == errno.EADDRINUSE

    assert serve_port(port) == port


def test_a_port_someone_listens_on_is_not_taken() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])

        assert serve_port(port) != port

"""`reserve` and `unreserve` of the local backend under the node's lock.

The race is made to happen every time, not by luck: `unreserve` is held between its read of
the reservation and its unlink while another thread reserves the node for another run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

import cluster.local.reservation as local_reservation
from cluster.local.backend import LocalBackend
from tests.cluster.local.builders import NODE

DEADLINE_S = 30.0


class Gates:
    """Events the two threads meet at: `read` once the unreserving thread read the
    reservation, `reserver_at_node` once the reserving thread wrote the file (no lock) or
    reached the node's lock (it then waits there), `go` to let the unreserving thread on."""

    def __init__(self) -> None:
        self.read = threading.Event()
        self.reserver_at_node = threading.Event()
        self.go = threading.Event()
        self.unreserver: int | None = None
        self.reserver: int | None = None


@pytest.fixture
def gates(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gates]:
    """The reservation module's `read_json`, `write_json` and `locked`, wrapped to meet at gates."""
    found = Gates()
    read_json: Callable[[Path], Any] = local_reservation.read_json
    write_json: Callable[[Path, Any], None] = local_reservation.write_json
    locked: Callable[[Path], AbstractContextManager[None]] = local_reservation.locked

    def gated_read(path: Path) -> Any:
        value = read_json(path)
        me = threading.get_ident()
        if me == found.unreserver and path.name == "reservation.json" and not found.read.is_set():
            found.read.set()
            assert found.go.wait(DEADLINE_S), "the test never let the unreserve go on"
        return value

    def gated_write(path: Path, value: Any) -> None:
        write_json(path, value)
        if threading.get_ident() == found.reserver and path.name == "reservation.json":
            found.reserver_at_node.set()

    @contextmanager
    def gated_locked(path: Path) -> Iterator[None]:
        if threading.get_ident() == found.reserver and path.name == "node.lock":
            found.reserver_at_node.set()  # it blocks here while the unreserve holds the lock
        with locked(path):
            yield

    monkeypatch.setattr(local_reservation, "read_json", gated_read)
    monkeypatch.setattr(local_reservation, "write_json", gated_write)
    monkeypatch.setattr(local_reservation, "locked", gated_locked)
    yield found
    found.go.set()


def test_a_reservation_made_while_another_is_released_is_kept(
    backend: LocalBackend, gates: Gates
) -> None:
    """Run "a" releases the node while run "b" reserves it: "b" holds the node after both.

    Without the node's lock in `reserve`, "b"'s file is written between the release's read
    (of "a") and its unlink, and the unlink deletes "b"'s reservation."""
    backend.reserve(NODE, "a")
    errors: list[BaseException] = []

    def thread(call: Callable[[], None], role: str) -> threading.Thread:
        def body() -> None:
            setattr(gates, role, threading.get_ident())
            try:
                call()
            except BaseException as exc:  # reported by the test below
                errors.append(exc)

        worker = threading.Thread(target=body, name=role)
        setattr(gates, role, None)
        return worker

    unreserving = thread(lambda: backend.unreserve(NODE, "a"), "unreserver")
    reserving = thread(lambda: backend.reserve(NODE, "b"), "reserver")
    unreserving.start()
    assert gates.read.wait(DEADLINE_S), "the unreserve never read the reservation"
    reserving.start()
    assert gates.reserver_at_node.wait(DEADLINE_S), "the reserve never reached the node"
    gates.go.set()
    unreserving.join(DEADLINE_S)
    reserving.join(DEADLINE_S)

    assert not unreserving.is_alive() and not reserving.is_alive()
    assert errors == []
    assert backend.nodes()[0].reserved_by == "b"

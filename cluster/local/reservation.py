"""The reservation of the local backend's one node, as a file of its state directory.

    <state>/reservation.json   {"node": ..., "run_id": ...}: the run the node is reserved for
    <state>/node.lock          held while pods are admitted, and while the reservation changes

A pass admits pods under the node's lock, so it sees a reservation whole, before or after a
change, never in between.
"""

from __future__ import annotations

from pathlib import Path

from cluster.local.atomic_files import locked, read_json, write_json

RESERVATION_FILE = "reservation.json"
NODE_LOCK = "node.lock"


def reserved_for(state: Path) -> str | None:
    """The run the node is reserved for, None when it is not reserved."""
    reservation = read_json(state / RESERVATION_FILE)
    return None if reservation is None else str(reservation["run_id"])


def reserve(state: Path, *, node: str, run_id: str) -> None:
    """Reserve the node for a run, replacing any reservation."""
    # The node's lock, which `release` holds from its read to its unlink: without it a
    # reservation written between the two is deleted with the one released (the node free
    # while its run believes it reserved; tests/cluster/local/test_reservation_race.py).
    with locked(state / NODE_LOCK):
        write_json(state / RESERVATION_FILE, {"node": node, "run_id": run_id})


def release(state: Path, *, run_id: str) -> None:
    """Release the run's reservation; another run's reservation stays."""
    path = state / RESERVATION_FILE
    # The node's lock: the reservation read here is the one unlinked, not one a `reserve` of
    # another run wrote meanwhile (that one would be lost).
    with locked(state / NODE_LOCK):
        current = read_json(path)
        if current is not None and current.get("run_id") == run_id:
            path.unlink(missing_ok=True)

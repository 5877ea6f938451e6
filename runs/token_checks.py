"""Bearer tokens this process found active lately, with their identities, so most requests
skip the database.

A token checked in the database within `SIMRUN_TOKEN_RECHECK_S` seconds is taken as still
active, for the identity it had then (a change of an identity's kind or person shows at the
next check). A revocation (or deletion) made in this process forgets the token at once; one made
elsewhere (another web process, the `simrun` command, the admin of another process) holds
here from the next check, at most that many seconds later. 0 checks every request.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runs.models import Identity

MAX_ENTRIES = 10_000


class TokenChecks:
    """Per token hash: when it was last found active, and its identity."""

    def __init__(self) -> None:
        # Request threads read, note and forget at once: without it a note racing the clear at
        # MAX_ENTRIES, or a forget (a revocation) racing a note, could leave the dict torn.
        self._lock = threading.Lock()
        self._checked: dict[str, tuple[float, Identity]] = {}

    def fresh(self, token_hash: str, *, max_age_s: float) -> Identity | None:
        """The identity of a token found active less than `max_age_s` ago, else None."""
        with self._lock:
            entry = self._checked.get(token_hash)
        if entry is None or time.monotonic() - entry[0] >= max_age_s:
            return None
        return entry[1]

    def note(self, token_hash: str, identity: Identity) -> None:
        """Record that the token was just found active in the database, for `identity`."""
        with self._lock:
            if len(self._checked) >= MAX_ENTRIES:
                self._checked.clear()
            self._checked[token_hash] = (time.monotonic(), identity)

    def forget(self, token_hash: str) -> None:
        """The token was revoked or deleted here: check it in the database next time."""
        with self._lock:
            self._checked.pop(token_hash, None)


token_checks = TokenChecks()

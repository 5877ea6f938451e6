"""A service's sign of life for `simrun serve`: a file it touches when it has done its work.

serve gives its services `SIMRUN_LIVENESS_DIR`; beat touches `<dir>/beat` at each tick of its
scheduler, the watcher `<dir>/watcher` at the end of each reconcile pass, and serve restarts
one whose file has not moved for `SIMRUN_LIVENESS_S` (runs/cli/liveness.py). Touching a file
that exists costs one `utime` call and needs no free space, so a full disk does not look
like a dead service. Outside serve (no variable) nothing is written.
"""

from __future__ import annotations

import os
import time

LIVENESS_DIR_ENV = "SIMRUN_LIVENESS_DIR"
_EVERY_S = 1.0  # at most one touch a second per process: a pass may be much shorter
_last: dict[str, float] = {}


def stamp(name: str) -> None:
    """Say that the service `name` made progress just now (at most once a second)."""
    folder = os.environ.get(LIVENESS_DIR_ENV)
    if not folder:
        return
    now = time.monotonic()
    if now - _last.get(name, -_EVERY_S) < _EVERY_S:
        return
    _last[name] = now
    path = os.path.join(folder, name)
    try:
        os.utime(path)
    except FileNotFoundError:
        try:
            with open(path, "a"):
                pass
        except OSError:
            pass
    except OSError:
        pass

"""A test session that starts `simrun serve` the way the tests do and then waits, for
tests/e2e/test_orphans.py to kill: not collected by itself (its name is no test's).

The data directory is under PROBE_DIR; serve's pid is written to PROBE_DIR/serve.pid.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.e2e.serving import serving


def test_serve_then_wait_to_be_killed() -> None:
    probe = Path(os.environ["PROBE_DIR"])
    with serving(probe) as served:
        (probe / "serve.pid").write_text(str(served.proc.pid))
        time.sleep(600)  # the session is killed here: what is being tested is what follows

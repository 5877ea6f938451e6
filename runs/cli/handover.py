"""How `simrun serve`, once set up with Django, becomes its supervisor without it.

serve needs Django for its set-up only (the database migrated, the machine's token, the
settings it supervises by, the login link it prints); the hours it then supervises need none
of it. So once set up it writes a `ServePlan` into a pipe and `exec`s `runs.cli.supervise`,
which reads it: the same process (its pid, start time and children are what the services and
`simrun status` know it by) without the ~45 MB of Django and the project.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NoReturn

from runs.cli.base import CommandError

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ServePlan:
    """What serve supervises by, as its set-up read it from the settings and the database."""

    data_dir: str
    store: str
    port: int
    pods_grace_s: float
    restart_burst: int
    restart_window_s: float
    deadline_s: float
    disks: list[str]
    min_free: int
    log_max_bytes: int
    log_backups: int
    fork: bool
    login_line: str


def hand_over(plan: ServePlan) -> NoReturn:
    """Replace this process by the supervisor of `plan` (read from an inherited pipe: the
    plan holds a login link, which a command line would show to everyone)."""
    read, write = os.pipe()
    data = json.dumps(asdict(plan)).encode()
    if len(data) > 60_000:  # a pipe holds 64 KiB before a writer waits for its reader
        raise CommandError("serve's settings are too long to hand to its supervisor")
    os.write(write, data)
    os.close(write)
    os.set_inheritable(read, True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.chdir(ROOT)  # where `-m runs…` imports from; every path of the plan is absolute
    command = [sys.executable, "-m", "runs.cli.supervise", "serve", "--port", str(plan.port)]
    os.execv(sys.executable, [*command, "--plan-fd", str(read)])

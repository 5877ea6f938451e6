"""manage.py in a process of its own, with only the variables a test gives (settings are read
once at start-up, so a setting's effect on start-up is seen in a new process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def manage(
    *args: str, cwd: Path, env: dict[str, str] | None = None, umask: int = -1
) -> subprocess.CompletedProcess[str]:
    """Run manage.py with no SIMRUN_/DATABASE_/CELERY_/DJANGO_ variable but those of `env`
    (the browser tests set DJANGO_ALLOW_ASYNC_UNSAFE in this process, which `check --deploy`
    rightly warns about)."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SIMRUN_", "DATABASE_", "CELERY_", "DJANGO_"))
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        umask=umask,
    )

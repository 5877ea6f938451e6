"""Fixtures of the command line's tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory made by `manage.py migrate` once; each test copies it (a migration of
    a fresh SQLite database costs seconds, a copy nothing)."""
    data_dir = tmp_path_factory.mktemp("installed") / "data"
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "--no-input"],
        cwd=ROOT,
        env={**os.environ, "SIMRUN_DATA_DIR": str(data_dir), "DATABASE_URL": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return data_dir

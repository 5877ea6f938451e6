"""`deploy/local/dev.sh test` says in one line what a machine lacks for the tests, before it
runs anything, when it cannot install it itself (not root).

The script runs for real as a user who is not root (nobody, through setpriv), with a PATH
holding only the few tools it needs and a stand-in Python that records being started: a
missing tool is a tool not on that PATH, as on a fresh machine. As root it installs Chromium
with apt-get; that path is what `.ci/run` and the README's test command exercise on a machine
without a browser.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.manifests import DEPLOY

SCRIPT = DEPLOY / "local" / "dev.sh"
NOBODY = 65534
RECORDING_PYTHON = """#!/bin/sh
touch "$(dirname "$0")/python-ran"
exit 1
"""


@pytest.fixture
def place() -> Iterator[Path]:
    """A directory user nobody can read (pytest's own are its owner's only)."""
    with tempfile.TemporaryDirectory(prefix="simrun-dev-sh-") as name:
        Path(name).chmod(0o755)
        yield Path(name)


def _tools(place: Path, names: list[str]) -> Path:
    """A directory for PATH with `names` linked from this machine, and a recording python3."""
    bin_dir = place / "bin"
    bin_dir.mkdir()
    for name in ["bash", "dirname", "id", *names]:
        found = shutil.which(name)
        assert found, f"{name} is not installed here"
        (bin_dir / name).symlink_to(found)
    (bin_dir / "python3").write_text(RECORDING_PYTHON)
    (bin_dir / "python3").chmod(0o755)
    return bin_dir


def _run_as_nobody(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(bin_dir), "HOME": str(bin_dir), "LANG": "C.UTF-8"}
    # as root, become nobody; anyone else is not root already
    setpriv = shutil.which("setpriv") or "setpriv"
    command = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    if os.geteuid() != 0:
        command = []
    return subprocess.run(
        [*command, str(bin_dir / "bash"), str(SCRIPT), "test"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_missing_browser_is_named_with_how_to_install_it(place: Path) -> None:
    """Without chromium and without root: exit 1, one line naming the package and the
    apt-get command, and nothing else started (no Python, no tests)."""
    bin_dir = _tools(place, ["pg_isready", "pg_ctlcluster", "redis-cli", "redis-server"])

    result = _run_as_nobody(bin_dir)

    assert result.returncode == 1, result
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "chromium" in lines[0]
    assert "sudo apt-get install -y chromium" in lines[0]
    assert not (bin_dir / "python-ran").exists()


def test_a_missing_database_is_named_even_with_the_browser_missing_too(place: Path) -> None:
    """Without PostgreSQL's tools (and without chromium): one line naming both packages."""
    bin_dir = _tools(place, ["redis-cli", "redis-server"])

    result = _run_as_nobody(bin_dir)

    assert result.returncode == 1, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "sudo apt-get install -y postgresql chromium" in lines[0]
    assert not (bin_dir / "python-ran").exists()

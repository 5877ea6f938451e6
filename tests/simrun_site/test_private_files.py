"""Secrets on disk are private: the data directory, the SQLite database (password and token
hashes), the secret key and the broker's folders are the service's user's only (0700 folders,
0600 files), whatever the umask, and looser ones left by earlier starts are fixed."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

from tests.simrun_site import processes


def manage(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """manage.py on the embedded default, under umask 0 (so nothing is private by chance)."""
    return processes.manage(*args, cwd=cwd, umask=0)


def modes(data: Path) -> dict[str, str]:
    """The permission bits of everything in the data directory that holds secrets."""
    paths = [data, data / "secret_key", data / "broker", data / "simrun.sqlite3"]
    paths += [data / "broker" / sub for sub in ("in", "processed", "control")]
    paths += [p for p in data.glob("simrun.sqlite3-*")]
    return {str(p.relative_to(data.parent)): oct(stat.S_IMODE(p.stat().st_mode)) for p in paths}


CONNECT = (
    "shell",
    "-c",
    "import glob, os, stat\n"
    "from django.db import connection\n"
    "connection.cursor().execute('create table if not exists t (x int)')\n"
    "for p in sorted(glob.glob('.simrun/simrun.sqlite3-*')):\n"
    "    print('journal', p, oct(stat.S_IMODE(os.stat(p).st_mode)))\n",
)
"""Start as every process does and write to the database; print the modes of its journals
while it is open (SQLite removes them when the last connection closes)."""


def journals(output: str) -> list[str]:
    """The modes the CONNECT command printed: SQLite gives its journals the file's mode."""
    found = [line.split()[2] for line in output.splitlines() if line.startswith("journal ")]
    assert len(found) == 2, output  # -wal and -shm
    return found


def expected(data: Path) -> dict[str, str]:
    return {
        name: "0o600" if Path(data.parent / name).is_file() else "0o700" for name in modes(data)
    }


def test_the_embedded_default_creates_its_secrets_private(tmp_path: Path) -> None:
    started = manage(*CONNECT, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    assert journals(started.stdout) == ["0o600", "0o600"]
    data = tmp_path / ".simrun"
    found = modes(data)
    assert len(found) == 7, found
    assert found == expected(data)


def test_loose_secrets_of_an_earlier_start_are_made_private_at_start(tmp_path: Path) -> None:
    assert manage(*CONNECT, cwd=tmp_path).returncode == 0
    data = tmp_path / ".simrun"
    for path in [data, data / "broker", *(data / "broker").iterdir()]:
        path.chmod(0o777)
    for path in [data / "secret_key", *data.glob("simrun.sqlite3*")]:
        path.chmod(0o666)
    started = manage(*CONNECT, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    assert journals(started.stdout) == ["0o600", "0o600"]
    assert modes(data) == expected(data)

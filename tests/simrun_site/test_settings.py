"""Start-up: the embedded default needs no variable; a bad value names the variable."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def manage(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("SIMRUN_", "DATABASE_", "CELERY_"))
    }
    base.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=cwd,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_embedded_default_checks_and_migrates_with_no_variables(tmp_path: Path) -> None:
    check = manage("check", cwd=tmp_path, env={})
    assert check.returncode == 0, check.stderr
    migrate = manage("migrate", "--no-input", cwd=tmp_path, env={})
    assert migrate.returncode == 0, migrate.stderr
    assert (tmp_path / ".simrun" / "simrun.sqlite3").exists()
    with sqlite3.connect(tmp_path / ".simrun" / "simrun.sqlite3") as db:
        assert db.execute("pragma journal_mode").fetchone()[0] == "wal"


def test_a_bad_database_url_stops_start_up_naming_the_variable(tmp_path: Path) -> None:
    result = manage("check", cwd=tmp_path, env={"DATABASE_URL": "mysql://db/simrun"})
    assert result.returncode != 0
    assert "DATABASE_URL='mysql://db/simrun': unsupported scheme 'mysql'" in result.stderr


def test_a_bad_number_stops_start_up_naming_the_variable(tmp_path: Path) -> None:
    result = manage("check", cwd=tmp_path, env={"SIMRUN_POLL_S": "soon"})
    assert result.returncode != 0
    assert "SIMRUN_POLL_S='soon' is not a number" in result.stderr


def test_a_secret_can_come_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "key"
    secret.write_text("from-a-file\n")
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    result = manage("shell", "-c", code, cwd=tmp_path, env={"SIMRUN_SECRET_KEY_FILE": str(secret)})
    assert result.stdout.strip().splitlines()[-1] == "from-a-file", result.stderr


def test_an_unknown_backend_is_refused(tmp_path: Path) -> None:
    result = manage("check", cwd=tmp_path, env={"SIMRUN_BACKEND": "slurm"})
    assert "SIMRUN_BACKEND='slurm' is not one of local, argo" in result.stderr

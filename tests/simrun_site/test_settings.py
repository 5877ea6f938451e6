"""Start-up: the embedded default needs no variable; a bad value names the variable."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

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


def test_the_service_waits_two_minutes_for_a_merge_marker_by_default(tmp_path: Path) -> None:
    """K12: C2: with SIMRUN_MERGE_MARKER_GRACE_S unset, a coordinator's missing merge marker
    is waited for 120 s (a store mounted without `lookupcache=positive` may hide it that
    long: the attribute cache's 60 s at most, twice)."""
    code = "from django.conf import settings; print(settings.SIMRUN_MERGE_MARKER_GRACE_S)"
    result = manage("shell", "-c", code, cwd=tmp_path, env={})
    assert result.stdout.strip().splitlines()[-1] == "120.0", result.stderr


def test_the_allowed_directories_of_local_packages_are_absolute_and_as_written(
    tmp_path: Path,
) -> None:
    """SIMRUN_LOCAL_PACKAGE_ROOTS: `~` expanded, `..` taken out, a link in it not resolved
    (a model names its packages by the path the operator gave)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    code = "from runs.store import local_package_rules as r; print(*r().roots, sep=',')"
    roots = f"~/plugins, {tmp_path}/linked/../linked/lab"
    env = {"SIMRUN_LOCAL_PACKAGE_ROOTS": roots, "HOME": str(tmp_path / "home")}
    result = manage("shell", "-c", code, cwd=tmp_path, env=env)
    assert result.stdout.strip().splitlines()[-1] == (
        f"{tmp_path}/home/plugins,{tmp_path}/linked/lab"
    ), result.stderr


def _postgres_url() -> str:
    """The URL of the test run's Postgres database."""
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.mark.django_db(transaction=True)
def test_the_web_process_takes_postgres_connections_from_a_pool() -> None:
    """Under ASGI every request runs in a thread of its own: the web entry point pools its
    connections (SIMRUN_DB_POOL, SIMRUN_DB_POOL_SIZE): six requests' worth of connecting
    uses at most the pool's three connections."""
    if connection.vendor != "postgresql":
        pytest.skip("pooling is for Postgres")
    code = (
        "import simrun_site.asgi\n"
        "from django.db import connection\n"
        "pids = set()\n"
        "for _ in range(6):\n"
        "    with connection.cursor() as cursor:\n"
        "        cursor.execute('SELECT pg_backend_pid()')\n"
        "        pids.add(cursor.fetchone()[0])\n"
        "    connection.close()\n"
        "print(connection.settings_dict['OPTIONS']['pool']['max_size'], len(pids))\n"
    )
    env = {**os.environ, "DATABASE_URL": _postgres_url(), "SIMRUN_DB_POOL_SIZE": "3"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    size, backends = result.stdout.split()
    assert size == "3"
    assert int(backends) <= 3  # six requests' connections came from the pool


def test_other_processes_keep_persistent_connections(tmp_path: Path) -> None:
    code = "from django.db import connection as c; print(c.settings_dict['CONN_MAX_AGE'], c.pool)"
    env = {"DATABASE_URL": "postgres://postgres@127.0.0.1/postgres"}
    result = manage("shell", "-c", code, cwd=tmp_path, env=env)
    assert result.stdout.split()[-2:] == ["60", "None"], result.stderr


def test_a_bad_pool_size_stops_start_up_naming_the_variable(tmp_path: Path) -> None:
    env = {
        "DATABASE_URL": "postgres://postgres@127.0.0.1/postgres",
        "SIMRUN_DB_POOL": "true",
        "SIMRUN_DB_POOL_SIZE": "0",
    }
    result = manage("check", cwd=tmp_path, env=env)
    assert result.returncode != 0
    assert "SIMRUN_DB_POOL_SIZE" in result.stderr


def test_beats_reconcile_is_the_watchers_backstop_on_its_own_interval(tmp_path: Path) -> None:
    """An idle service ticks rarely: beat's reconcile follows SIMRUN_BEAT_POLL_S (30 s by
    default), not the watcher's SIMRUN_POLL_S."""
    code = "from django.conf import settings; print(settings.CELERY_BEAT_SCHEDULE['reconcile'])"
    default = manage("shell", "-c", code, cwd=tmp_path, env={"SIMRUN_POLL_S": "0.5"})
    given = manage("shell", "-c", code, cwd=tmp_path, env={"SIMRUN_BEAT_POLL_S": "45"})

    assert "'schedule': 30.0" in default.stdout, default.stderr
    assert "'schedule': 45.0" in given.stdout, given.stderr

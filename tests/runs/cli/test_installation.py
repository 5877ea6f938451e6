"""`simrun` finds its installation from any directory, or refuses; it never starts an empty one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SIMRUN = Path(sys.executable).parent / "simrun"


def simrun(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The console script as a user types it: none of the test's settings in its environment."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SIMRUN_", "DATABASE_", "CELERY_", "DJANGO_"))
    }
    return subprocess.run(
        [str(SIMRUN), *args],
        cwd=cwd,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def migrated(installed: Path, data_dir: Path) -> None:
    shutil.copytree(installed, data_dir)


def test_outside_any_installation_it_refuses_and_creates_nothing(tmp_path: Path) -> None:
    for command in (["runs"], ["show", "abc"], ["owner", "create", "me"]):
        result = simrun(*command, cwd=tmp_path)
        assert result.returncode == 1, result
        assert "no simrun installation here" in result.stderr
        assert "or set SIMRUN_DATA_DIR" in result.stderr
    assert list(tmp_path.iterdir()) == []  # no .simrun/, no database


def test_from_a_subdirectory_it_uses_the_nearest_installation_above(
    installed: Path, tmp_path: Path
) -> None:
    migrated(installed, tmp_path / ".simrun")
    deep = tmp_path / "study" / "scans"
    deep.mkdir(parents=True)
    made = simrun("person", "create", "ada", cwd=deep)
    assert made.returncode == 0, made.stderr
    token = simrun(
        "token", "create", "ada", cwd=tmp_path, SIMRUN_DATA_DIR=str(tmp_path / ".simrun")
    )
    assert token.returncode == 0, token.stderr  # ada is in the installation above
    assert sorted(p.name for p in deep.iterdir()) == []
    assert not (tmp_path / "study" / ".simrun").exists()


def test_simrun_data_dir_wins_over_a_nearer_installation(installed: Path, tmp_path: Path) -> None:
    migrated(installed, tmp_path / "elsewhere")
    (tmp_path / ".simrun").mkdir()  # nearer, but not the one named
    made = simrun(
        "person", "create", "bo", cwd=tmp_path, SIMRUN_DATA_DIR=str(tmp_path / "elsewhere")
    )
    assert made.returncode == 0, made.stderr
    assert list((tmp_path / ".simrun").iterdir()) == []


def test_validate_needs_no_installation(tmp_path: Path) -> None:
    result = simrun(
        "validate", str(ROOT / "examples" / "workflows" / "repressilator.yaml"), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert list(tmp_path.iterdir()) == []

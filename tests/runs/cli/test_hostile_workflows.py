"""`simrun validate` and `simrun submit` on hostile workflow files: exit 1 with the limit and the
line, never a traceback. Run as a person runs them: the installed `simrun` in a subprocess.
(What the service refuses, `simrun submit` prints: tests/api/test_hostile_workflows.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.hostile import HOSTILE

ROOT = Path(__file__).resolve().parents[3]
SIMRUN = Path(sys.executable).parent / "simrun"


def simrun(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SIMRUN), *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_validate_refuses_each_hostile_class_with_its_line(name: str, tmp_path: Path) -> None:
    hostile = HOSTILE[name]
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(hostile.text)
    result = simrun("validate", str(path))
    assert result.returncode == 1, result.stdout + result.stderr
    said = result.stdout + result.stderr
    assert "Traceback" not in said
    assert f"{path}:{hostile.line}: " in said and hostile.says in said


def test_submit_refuses_a_file_that_is_not_utf8_before_sending_it(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(HOSTILE["not_utf8"].text)
    result = simrun("submit", str(path))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"simrun: {path}:4: not UTF-8 text: byte 0xe9" in result.stderr

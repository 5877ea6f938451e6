"""`simrun plugin new|install|list`: the plugin loop's commands, run as a person types them."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import uv
from pydantic import BaseModel, ValidationError

from runs.plugin_scaffold import scaffold

ROOT = Path(__file__).resolve().parents[3]
SIMRUN = Path(sys.executable).parent / "simrun"


def simrun(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SIMRUN), *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_plugin_new_writes_a_model_whose_plugin_passes_its_own_tests(tmp_path: Path) -> None:
    result = simrun("plugin", "new", "decay", "--dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    model = tmp_path / "decay"
    assert {p.name for p in model.iterdir()} == {
        "pyproject.toml",
        "model.json",
        "workflow.yaml",
        "plugin",
    }
    tests = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:django",
            "tests",
        ],
        cwd=model / "plugin",
        env={**os.environ, "PYTHONPATH": str(model / "plugin" / "src")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "3 passed" in tests.stdout


def test_plugin_new_refuses_a_bad_name_and_an_existing_directory(tmp_path: Path) -> None:
    bad = simrun("plugin", "new", "My-Plugin", "--dir", str(tmp_path))
    assert bad.returncode == 1
    assert bad.stderr.startswith("simrun: plugin name 'My-Plugin': use lowercase letters")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "decay").mkdir()
    taken = simrun("plugin", "new", "decay", "--dir", str(tmp_path))
    assert taken.returncode == 1
    assert (
        taken.stderr == f"simrun: {tmp_path / 'decay'} exists; choose another name or directory\n"
    )
    assert list((tmp_path / "decay").iterdir()) == []


def test_plugin_install_makes_its_types_known_to_that_python_and_list_shows_them(
    tmp_path: Path,
) -> None:
    """A throwaway environment stands for the service's (the tests' own must not change).
    It has no harness, which is on no package index: the install takes this simrun's copy,
    with the package index unreachable."""
    assert simrun("plugin", "new", "decay", "--dir", str(tmp_path)).returncode == 0
    venv = tmp_path / "venv"
    subprocess.run([uv.find_uv_bin(), "venv", "-q", "--python", sys.executable, venv], check=True)
    python = venv / "bin" / "python"
    result = simrun(
        "plugin",
        "install",
        str(tmp_path / "decay" / "plugin"),
        "--python",
        str(python),
        UV_OFFLINE="1",
    )
    assert result.returncode == 0, result.stderr
    listed = subprocess.run(
        [python, "-c", "from simrun_harness.plugin import load_task_types as t; print(*t())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout.split() == ["decay"]
    # the service's list, from metadata: here the tests' own environment and its examples
    shown = simrun("plugin", "list", "--check")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    rows = [line.split() for line in shown.stdout.splitlines()[1:]]
    assert ["command", "simrun", "built-in"] in rows
    assert [
        "ode_scan",
        "simrun-examples",
        "0.1.0",
        str(ROOT / "examples" / "simrun-examples"),
    ] in rows


def test_plugin_list_check_names_a_plugin_that_fails_to_import(tmp_path: Path) -> None:
    from tests.plugins import errors_plugin

    site = errors_plugin(tmp_path / "site")
    shown = simrun("plugin", "list", "--check", PYTHONPATH=str(site))
    assert shown.returncode == 1
    assert (
        "  error: task type 'broken' failed to load from plugin broken-plugin 0.1 "
        "(broken_types:Broken): ImportError: needs libfoo, which is not installed"
    ) in shown.stdout.splitlines()
    assert any(
        line.split()[:3] == ["picky", "picky-plugin", "0.1"] for line in shown.stdout.splitlines()
    )


def scaffolded_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> type[BaseModel]:
    """The settings model of a plugin `simrun plugin new` writes, imported from its file."""
    model = scaffold(name="bounded", parent=tmp_path)
    path = model / "plugin" / "src" / "bounded" / "types.py"
    spec = importlib.util.spec_from_file_location("bounded_types", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    settings: type[BaseModel] = module.BoundedSettings
    return settings


@pytest.mark.parametrize(
    ("setting", "at_most", "over"),
    [
        ("t_end", 1e6, 1.5e6),
        ("n_points", 100_000, 100_001),
        ("rates", [1000.0], [1000.5]),
        ("rates", [0.5] * 10_000, [0.5] * 10_001),
    ],
    ids=["t_end", "n_points", "a rate", "the number of rates"],
)
def test_every_number_of_the_scaffolds_settings_has_a_maximum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, at_most: Any, over: Any
) -> None:
    """As docs/plugins.md asks of every settings model: a value over its maximum is a
    validation error naming the setting; the maximum itself is accepted."""
    settings = scaffolded_settings(tmp_path, monkeypatch)
    ordinary = {"rates": [0.5, 2.0]}

    assert getattr(settings(**{**ordinary, setting: at_most}), setting) == at_most
    with pytest.raises(ValidationError, match=rf"(?s){setting}.*(less than or equal to|at most)"):
        settings(**{**ordinary, setting: over})
    schema = settings.model_json_schema()["properties"]
    assert "maximum" in schema["t_end"] and "maximum" in schema["n_points"]
    assert "maxItems" in schema["rates"] and "maximum" in schema["rates"]["items"]

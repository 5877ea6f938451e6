"""Plugin errors are messages: a plugin's failure names the task and the plugin, never a
traceback, and a plugin that fails to import leaves the other types working."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_django import Settings

from runs.cli.main import main
from runs.models import Run
from runs.task_types import registry
from runs.validation import errors_of
from tests.plugins import errors_plugin, on_path

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = "plugin picky-plugin 0.1 (picky_types:Picky)"


@pytest.fixture
def plugin_root(tmp_path: Path) -> Iterator[Path]:
    root = errors_plugin(tmp_path / "site")
    with on_path(root):
        yield root


def workflow(task_type: str, settings: str = "{}") -> str:
    return f"name: w\ntasks:\n  - id: t\n    type: {task_type}\n    settings: {settings}\n"


def test_a_plugin_that_fails_to_import_is_named_and_the_other_types_keep_working(
    plugin_root: Path,
) -> None:
    types = registry()
    loaded = dict(types.items())
    assert "broken" not in loaded and {"picky", "ode_scan", "command"} <= set(loaded)
    assert types.problems() == {
        "broken": "task type 'broken' failed to load from plugin broken-plugin 0.1 "
        "(broken_types:Broken): ImportError: needs libfoo, which is not installed"
    }
    assert errors_of(workflow("picky")) == []
    [error] = errors_of(workflow("broken"))
    assert str(error) == f"task 't': type: {types.problems()['broken']}"


def test_a_settings_validator_that_raises_is_a_message_naming_the_task_and_the_plugin(
    plugin_root: Path,
) -> None:
    """S4: an invalid setting is one error naming the task, even when the plugin's own
    validator raises something else than a validation error."""
    [error] = errors_of(workflow("picky", "{mode: bug}"))
    assert (
        str(error) == f"task 't': settings: TypeError: the validator has a bug (raised by {PLUGIN})"
    )


def test_validate_names_a_plugin_that_fails_to_import_in_one_line(plugin_root: Path) -> None:
    """The command line: exit 1, one line per error, no traceback."""
    path = plugin_root.parent / "w.yaml"
    env = dict(os.environ, PYTHONPATH=str(plugin_root))
    for task_type, code in (("broken", 1), ("picky", 0)):
        path.write_text(workflow(task_type))
        result = subprocess.run(
            [sys.executable, "-m", "runs.cli.main", "validate", str(path)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == code, result.stdout + result.stderr
        assert "Traceback" not in result.stderr
    path.write_text(workflow("broken"))
    result = subprocess.run(
        [sys.executable, "-m", "runs.cli.main", "validate", str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stdout.splitlines() == [
        f"{path}:4: task 't': type: task type 'broken' failed to load from plugin "
        "broken-plugin 0.1 (broken_types:Broken): ImportError: needs libfoo, which is not installed"
    ]


def test_a_settings_error_of_units_at_submit_is_one_message_and_exit_1(
    plugin_root: Path,
    tmp_path: Path,
    simrun_api: str,
    settings: Settings,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from runs.backends import backend

    settings.SIMRUN_BACKEND = "local"
    backend.cache_clear()
    path = tmp_path / "w.yaml"
    path.write_text(workflow("picky", "{parameter: k9}"))
    assert main(["submit", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "simrun: the workflow is invalid:",
        f"task 't': settings: units(): the model has no parameter 'k9' (raised by {PLUGIN}); "
        "this submission has no model snapshot: give the model's directory with `simrun "
        "submit --source DIR` (API: `sources`, the model first)",
    ]
    assert not Run.objects.exists()
    backend.cache_clear()

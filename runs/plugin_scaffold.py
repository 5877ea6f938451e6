"""`simrun plugin new`: a model directory with a plugin package inside it, ready to run.

The model directory (what `--source` snapshots) holds the model's `pyproject.toml`, which
installs the plugin from its relative path `plugin/` (so every edit of the plugin is part of
the snapshot and of the environment's identity, runs/local_packages.py), a `model.json` the
type reads, and a `workflow.yaml` of one task. The plugin is a split type with typed
settings and its own tests, which run it in one process with `simrun_harness.testing`.
No Django here.
"""

from __future__ import annotations

import re
from pathlib import Path

NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")


class ScaffoldRefused(ValueError):
    """A name or place the scaffold cannot use; the message says what is allowed."""


MODEL_PROJECT = """\
[project]
name = "{dist}-model"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["{dist}"]

# the plugin is a local package inside this directory: the environment of a run is built
# from the model's snapshot and named by the digest of the plugin's files
[tool.uv.sources]
{dist} = {{ path = "plugin" }}
"""
PLUGIN_PROJECT = """\
[build-system]
requires = ["hatchling==1.33.0"]
build-backend = "hatchling.build"

[project]
name = "{dist}"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["simrun-harness"]

[project.entry-points."simrun.task_types"]
{name} = "{name}.types:{cls}"

[tool.hatch.build.targets.wheel]
packages = ["src/{name}"]
"""
TYPES = '''\
"""The `{name}` task type: exponential decay curves, one unit per rate."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from simrun_harness.plugin import ResourceHint, SettingsError, SplitTaskType, TaskContext

MESSAGE = "decay"


class {cls}Settings(BaseModel):
    """What a workflow may set; an unknown key is an error."""

    model_config = ConfigDict(extra="forbid")

    # every number has bounds: the service trusts no submitter with a billion points
    rates: list[Annotated[float, Field(ge=0, le=1000)]] = Field(
        min_length=1, max_length=10_000, description="Decay rates, one unit each."
    )
    t_end: float = Field(5.0, gt=0, le=1e6, description="End of the time course.")
    n_points: int = Field(11, ge=2, le=100_000, description="Points of each curve.")


class {cls}(SplitTaskType):
    """Decay curves of the model's initial amount, one unit per rate."""

    name: ClassVar[str] = "{name}"
    settings_model: ClassVar[type[BaseModel]] = {cls}Settings
    hint: ClassVar[ResourceHint] = ResourceHint(memory_base_gb=0.1, memory_per_worker_gb=0.1)

    def units(self, ctx: TaskContext) -> Sequence[Any]:
        initial(ctx)  # a model without its file is a settings error, found at submission
        return list(ctx.settings.rates)  # type: ignore[attr-defined]

    def run_unit(self, ctx: TaskContext, unit: Any, out: Path) -> None:
        settings: {cls}Settings = ctx.settings  # type: ignore[assignment]
        step = settings.t_end / (settings.n_points - 1)
        times = [step * i for i in range(settings.n_points)]
        values = [initial(ctx) * math.exp(-unit * t) for t in times]
        (out / "curve.json").write_text(json.dumps({{"rate": unit, "values": values}}))

    def merge(self, ctx: TaskContext, units: Sequence[Path], out: Path) -> None:
        curves = [json.loads((unit / "curve.json").read_text()) for unit in units]
        (out / "curves.json").write_text(json.dumps({{"message": MESSAGE, "curves": curves}}))


def initial(ctx: TaskContext) -> float:
    """The initial amount from the model directory's `model.json`."""
    if ctx.model_dir is None or not (ctx.model_dir / "model.json").is_file():
        raise SettingsError("the model directory has no model.json")
    return float(json.loads((ctx.model_dir / "model.json").read_text())["initial"])
'''
TESTS = '''\
"""The `{name}` type run in this process, as its pods would run it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from simrun_harness.plugin import SettingsError
from simrun_harness.testing import run_task
from {name}.types import {cls}

MODEL = Path(__file__).resolve().parents[2]  # the model directory around the plugin


def test_one_curve_per_rate_in_rate_order(tmp_path: Path) -> None:
    settings = {{"rates": [0.5, 2.0], "n_points": 3}}
    out = run_task({cls}, settings, out=tmp_path / "out", model_dir=MODEL)
    curves = json.loads((out / "curves.json").read_text())["curves"]
    assert [c["rate"] for c in curves] == [0.5, 2.0]
    assert curves[0]["values"][0] == 1.0 and curves[1]["values"][-1] < curves[0]["values"][-1]


def test_a_bad_setting_is_a_validation_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        run_task({cls}, {{"rates": []}}, out=tmp_path / "out", model_dir=MODEL)


def test_a_model_without_its_file_is_a_settings_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError):
        run_task({cls}, {{"rates": [1.0]}}, out=tmp_path / "out", model_dir=tmp_path)
'''
WORKFLOW = """\
name: {name}-run
tasks:
  - id: decay
    type: {name}
    settings: {{rates: [0.5, 1.0, 2.0, 4.0], t_end: 5, n_points: 11}}
"""


def scaffold(*, name: str, parent: Path) -> Path:
    """Write a model directory `parent/name` with the plugin of type `name` inside; return it.

    Raises ScaffoldRefused for a name that is no lowercase identifier or a directory that
    exists (nothing is written then).
    """
    if not NAME.match(name):
        raise ScaffoldRefused(
            f"plugin name {name!r}: use lowercase letters, digits and _ (a Python module name"
            " that starts with a letter, at most 41 characters)"
        )
    root = parent / name
    if root.exists():
        raise ScaffoldRefused(f"{root} exists; choose another name or directory")
    values = {"name": name, "dist": name.replace("_", "-"), "cls": _class_name(name)}
    files = {
        "pyproject.toml": MODEL_PROJECT,
        "model.json": '{{"initial": 1.0}}\n',
        "workflow.yaml": WORKFLOW,
        "plugin/pyproject.toml": PLUGIN_PROJECT,
        f"plugin/src/{name}/__init__.py": '"""The {name} plugin of simrun."""\n',
        f"plugin/src/{name}/types.py": TYPES,
        f"plugin/tests/test_{name}.py": TESTS,
    }
    for relative, template in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**values))
    return root


def _class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_") if part) or "Plugin"

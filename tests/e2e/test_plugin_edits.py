"""Edits are picked up, never stale: a model whose plugin is a local package inside it runs
the plugin's current code in its pods, and the run records which plugin code it used."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from runs.backends import backend
from runs.cli.main import main
from runs.models import Run, Snapshot
from runs.services.submission import SubmissionRefused, create_run
from runs.snapshots import snapshot_directory
from runs.store import store, task_paths
from tests import factories
from tests.e2e.conftest import Services, wait_for_end
from tests.plugins import on_path

pytestmark = [pytest.mark.slow]

MODEL = """
[project]
name = "echo-model"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["echo-plugin"]

[tool.uv.sources]
echo-plugin = { path = "plugin" }
"""
PLUGIN = """
[build-system]
requires = ["hatchling==1.33.0"]
build-backend = "hatchling.build"

[project]
name = "echo-plugin"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["simrun-harness"]

[project.entry-points."simrun.task_types"]
echo = "echo_plugin:Echo"

[tool.hatch.build.targets.wheel]
packages = ["src/echo_plugin"]
"""
CODE = """
from simrun_harness.plugin import UnsplitTaskType

WORD = {word!r}


class Echo(UnsplitTaskType):
    \"\"\"Writes its word.\"\"\"

    name = "echo"

    def run(self, ctx, out):
        (out / "word.txt").write_text(WORD)
"""
WORKFLOW = {"name": "echo", "tasks": [{"id": "say", "type": "echo"}]}


def write_model(root: Path, word: str) -> Path:
    (root / "plugin" / "src" / "echo_plugin").mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(MODEL)
    (root / "plugin" / "pyproject.toml").write_text(PLUGIN)
    (root / "plugin" / "src" / "echo_plugin" / "__init__.py").write_text(CODE.format(word=word))
    return root


def service_knows(site: Path, *, dist: str, name: str, value: str, src: Path) -> None:
    """The service's own view of a plugin (validation and planning): its metadata and code on
    this process's path, as `simrun plugin install` makes them in the service's environment
    (which these tests share, so they do not change it)."""
    info = site / f"{dist.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[simrun.task_types]\n{name} = {value}\n")
    sys.path.insert(0, str(src))


def run_model(model: Path, workflow: dict | None = None) -> Run:
    info = snapshot_directory(store(), model)
    Snapshot.objects.get_or_create(digest=info.digest, defaults={"name": model.name})
    backend.cache_clear()
    run, _ = create_run(
        identity=factories.person(),
        workflow=workflow or WORKFLOW,
        sources=[info.digest],
        nodes=backend().nodes(),
    )
    run = wait_for_end(run.pk, timeout=400)
    assert run.state == "succeeded", run.message
    return run


def test_a_local_path_that_leaves_the_model_directory_is_refused_at_submission(
    services: Services, tmp_path: Path
) -> None:
    model = write_model(tmp_path / "model", "first")
    (model / "pyproject.toml").write_text(MODEL.replace('path = "plugin"', 'path = "../elsewhere"'))
    info = snapshot_directory(store(), model)
    Snapshot.objects.create(digest=info.digest, name="echo-model")
    with pytest.raises(SubmissionRefused) as refused:
        create_run(
            identity=factories.person(),
            workflow={
                "name": "c",
                "tasks": [{"id": "c", "type": "command", "settings": {"args": ["true"]}}],
            },
            sources=[info.digest],
            nodes=backend().nodes(),
        )
    assert str(refused.value) == (
        "sources: the model's pyproject.toml: [tool.uv.sources] echo-plugin = "
        "{ path = '../elsewhere' }: ../elsewhere leaves the model directory; a local package "
        "lies inside the model directory, named by a relative path that stays in it (the "
        "environment is built from the model's snapshot), or inside a directory allowed for "
        "local packages, named by its absolute path (SIMRUN_LOCAL_PACKAGE_ROOTS: none)"
    )
    assert not Run.objects.exists()


def test_a_scaffolded_plugin_runs_and_its_edit_shows_in_the_next_run(
    simrun_api: str, services: Services, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The walk-through of docs/plugins.md: `simrun plugin new`, a run of the new type, an
    edit of its code, and the next run's pods use the edit; each run records its plugin's
    digest (a local package of the model), which `simrun show` prints."""
    assert main(["plugin", "new", "decay", "--dir", str(tmp_path)]) == 0
    model = tmp_path / "decay"
    src = model / "plugin" / "src"
    service_knows(tmp_path / "site", dist="decay", name="decay", value="decay.types:Decay", src=src)
    workflow = yaml.safe_load((model / "workflow.yaml").read_text())
    types = src / "decay" / "types.py"
    try:
        with on_path(tmp_path / "site"):
            first = run_model(model, workflow)
            types.write_text(types.read_text().replace('MESSAGE = "decay"', 'MESSAGE = "edited"'))
            second = run_model(model, workflow)
    finally:
        sys.path.remove(str(src))
    curves = [
        json.loads((task_paths(r.pk, "decay").out / "curves.json").read_text())
        for r in (first, second)
    ]
    assert [c["message"] for c in curves] == ["decay", "edited"]
    assert [c["rate"] for c in curves[1]["curves"]] == [0.5, 1.0, 2.0, 4.0]
    [used_first] = first.environment["local_packages"]
    [used_second] = second.environment["local_packages"]
    assert used_first["name"] == used_second["name"] == "decay"
    assert used_first["digest"] != used_second["digest"]
    assert first.environment["ref"] != second.environment["ref"]
    assert main(["show", second.pk]) == 0
    shown = capsys.readouterr().out
    assert f"local package decay {used_second['digest']}" in shown
    marker = store().environments / second.environment["ref"] / ".simrun-environment.json"
    assert json.loads(marker.read_text())["local_packages"] == [used_second]

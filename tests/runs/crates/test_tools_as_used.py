"""A crate names each task type's plugin as the run used it (docs/provenance.md, "What a crate
holds"): the version and code digest its tasks' keys hold, written at submission, not those
installed when the crate is made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from runs.crates.validation import METADATA_FILE
from runs.crates.writing import write_crate
from runs.models import Run
from runs.plans import Node
from runs.reuse_plans import stored_parts
from runs.selectors.crates import run_record
from runs.services.reuse import plan_reuse
from runs.services.submission import create_run
from runs.task_types import plugin_identity
from tests import factories
from tests.plugins import on_path, write_plugin

pytestmark = pytest.mark.django_db

TALLY = """
from pydantic import BaseModel, ConfigDict
from simrun_harness.plugin import UnsplitTaskType


class TallySettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    start: int = {start}


class Tally(UnsplitTaskType):
    name = "tally"
    settings_model = TallySettings

    def run(self, ctx, out):
        (out / "tally.txt").write_text(str(ctx.settings.start))
"""
WORKFLOW = {"name": "tallies", "tasks": [{"id": "tally", "type": "tally"}]}


def tally_plugin(root: Path, version: str, start: int) -> Path:
    return write_plugin(
        root,
        package="tally-plugin",
        version=version,
        modules={"tally_types": TALLY.format(start=start)},
        types={"tally": "tally_types:Tally"},
    )


def ended_run(*, keyed: bool) -> Run:
    """A run of `tally`, its keys made as its submission makes them (`keyed`), then ended."""
    run, _ = create_run(
        identity=factories.person(), workflow=WORKFLOW, sources=[], nodes=[Node("here", 2, 4)]
    )
    if keyed:
        plan_reuse(run_id=run.pk, environment="service")
    Run.objects.filter(pk=run.pk).update(state="succeeded", ended_at=timezone.now())
    return Run.objects.get(pk=run.pk)


def crate_graph(run: Run, store: Path, target: Path) -> dict[str, dict[str, Any]]:
    write_crate(run_record(run), target, store)
    data = json.loads((target / METADATA_FILE).read_text())
    return {entity["@id"]: entity for entity in data["@graph"]}


def test_a_plugin_upgraded_after_the_run_leaves_the_crate_naming_the_one_it_used(
    store: Path, tmp_path: Path
) -> None:
    with on_path(tally_plugin(tmp_path / "v1", "1.0", start=0)):
        run = ended_run(keyed=True)
    used = (stored_parts(run.pk, "tally") or {})["version"]
    assert used.startswith("1.0+")

    with on_path(tally_plugin(tmp_path / "v2", "2.0", start=1)):
        assert plugin_identity("tally")[1] == "2.0"  # what is installed when it is exported
        graph = crate_graph(run, store, tmp_path / "crate")

    tool = graph["#type/tally"]
    assert (tool["softwareVersion"], tool["identifier"]) == ("1.0", used.removeprefix("1.0+"))
    assert graph[tool["isPartOf"]["@id"]]["softwareVersion"] == "1.0"
    assert "recorded none" not in tool["description"]


def test_a_run_that_kept_no_keys_names_the_plugin_installed_and_says_so(
    store: Path, tmp_path: Path
) -> None:
    """A run refused before its keys were made: the crate can only say what is here now."""
    with on_path(tally_plugin(tmp_path / "v1", "1.0", start=0)):
        run = ended_run(keyed=False)

    with on_path(tally_plugin(tmp_path / "v2", "2.0", start=1)):
        tool = crate_graph(run, store, tmp_path / "crate")["#type/tally"]

    assert tool["softwareVersion"] == "2.0"
    assert tool["description"].endswith(
        "(its version as installed when the crate was made: the run recorded none)"
    )

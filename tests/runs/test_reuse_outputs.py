"""An unsplit task reuses the published output of an earlier task with its key (docs/reuse.md):
its `out/` once it has its marker, named in `reuse.json` for `simrun-exec` to link, recorded
as `{run: ["out"]}`; through `plan_reuse` as a submission calls it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runs.models import Run
from runs.plans import Node
from runs.services.reuse import plan_reuse
from runs.services.submission import create_run
from runs.store import task_paths
from simrun_harness.reuse import REUSE_FILE
from tests import factories

pytestmark = pytest.mark.django_db

SCAN = {"id": "scan", "type": "sleep", "settings": {"units": 2}}
SUMMARY = {"id": "summary", "type": "summary", "settings": {}, "inputs": {"scan": "scan"}}
STUDY = {"name": "study", "tasks": [SCAN, SUMMARY]}


def submitted(workflow: dict[str, Any] = STUDY, **options: Any) -> Run:
    nodes = [Node(name="local", cores=2, memory_gb=4)]
    run, _ = create_run(
        identity=factories.person(), workflow=workflow, sources=[], nodes=nodes, **options
    )
    plan_reuse(run_id=run.pk, environment="service")
    return Run.objects.get(pk=run.pk)


def published(run: Run, task_id: str = "summary", *, marker: bool = True) -> None:
    out = task_paths(run.pk, task_id).out
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text("{}")
    if marker:
        (out / ".simrun-merged").write_text("")


def reuse_file(run: Run) -> Path:
    return task_paths(run.pk, "summary").root / REUSE_FILE


def test_a_published_output_of_the_same_key_is_reused(store: Path) -> None:
    earlier = submitted()
    published(earlier)

    run = submitted()

    summary = run.tasks.get(task_id="summary")
    assert summary.reused == {earlier.pk: ["out"]}
    assert summary.key == earlier.tasks.get(task_id="summary").key
    assert json.loads(reuse_file(run).read_text()) == {
        "out": f"runs/{earlier.pk}/tasks/summary/out"
    }


def test_an_output_without_its_marker_is_not_reused(store: Path) -> None:
    """Its merge or exec did not finish: what is in `out/` may be half written."""
    published(submitted(), marker=False)

    run = submitted()

    assert run.tasks.get(task_id="summary").reused == {}
    assert not reuse_file(run).exists()


def test_the_newest_published_output_is_the_one_reused(store: Path) -> None:
    older, newer = submitted(), submitted()
    published(older)
    published(newer)

    assert submitted().tasks.get(task_id="summary").reused == {newer.pk: ["out"]}


def test_a_resumed_run_reuses_the_output_of_the_run_it_resumes_before_a_newer_one(
    store: Path,
) -> None:
    older, newer = submitted(), submitted()
    published(older)
    published(newer)

    resumed = submitted(resume_from=older.pk)

    assert resumed.tasks.get(task_id="summary").reused == {older.pk: ["out"]}


def test_an_output_computed_in_another_environment_is_not_reused(store: Path) -> None:
    """The environment a task ran in is part of its key: the same workflow in another
    environment (another model lock, say) computes again."""
    published(submitted())
    nodes = [Node(name="local", cores=2, memory_gb=4)]
    run, _ = create_run(identity=factories.person(), workflow=STUDY, sources=[], nodes=nodes)

    plan_reuse(run_id=run.pk, environment="0" * 64)

    assert run.tasks.get(task_id="summary").reused == {}


def test_an_output_of_another_key_or_with_reuse_off_is_not_reused(store: Path) -> None:
    published(submitted())
    other = {**SUMMARY, "settings": {"tail_fraction": 0.25}}

    changed = submitted({"name": "study", "tasks": [SCAN, other]})
    off = submitted(reuse=False)

    assert changed.tasks.get(task_id="summary").reused == {}
    assert off.tasks.get(task_id="summary").reused == {}
    assert off.tasks.get(task_id="summary").key  # keyed all the same, for runs after it

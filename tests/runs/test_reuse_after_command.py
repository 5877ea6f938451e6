"""A `command` task and every task after it are computed again at every run (docs/reuse.md):
nothing vouches for what a program outside the harness writes, so an output downstream of one
is never taken from an earlier run, through `plan_reuse` as a submission calls it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runs.models import Run
from runs.plans import Node
from runs.services.reuse import plan_reuse
from runs.services.submission import create_run
from runs.store import task_paths
from tests import factories

pytestmark = pytest.mark.django_db

PREP = {"id": "prep", "type": "command", "settings": {"args": ["true"]}}
SUMMARY = {"id": "summary", "type": "summary", "settings": {}, "inputs": {"scan": "prep"}}
AFTER_COMMAND = {"name": "after-command", "tasks": [PREP, SUMMARY]}


def submitted(workflow: dict[str, Any]) -> Run:
    """A run recorded, its keys and reuse planned as `submit_run` does."""
    nodes = [Node(name="local", cores=2, memory_gb=4)]
    run, _ = create_run(identity=factories.person(), workflow=workflow, sources=[], nodes=nodes)
    plan_reuse(run_id=run.pk, environment="service")
    return Run.objects.get(pk=run.pk)


def published(run: Run, task_id: str) -> None:
    """A task's output published as the harness leaves it: out/ with its marker last."""
    out = task_paths(run.pk, task_id).out
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text("{}")
    (out / ".simrun-merged").write_text("")


def test_a_task_after_a_command_reuses_nothing_of_an_earlier_identical_run(store: Path) -> None:
    earlier = submitted(AFTER_COMMAND)
    published(earlier, "prep")
    published(earlier, "summary")

    run = submitted(AFTER_COMMAND)

    reused = {t.task_id: dict(t.reused) for t in run.tasks.all()}
    assert reused == {"prep": {}, "summary": {}}
    assert run.tasks.get(task_id="summary").key != earlier.tasks.get(task_id="summary").key

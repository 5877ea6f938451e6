"""What a submission decides to reuse (`plan_reuse`), on runs whose units are marked done in
the store as the harness leaves them: only done units with the same unit key, the resumed
run first, nothing with reuse off, and recorded once."""

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
from simrun_harness.reuse import KEYS_FILE, REUSE_FILE
from tests import factories

pytestmark = pytest.mark.django_db

NAPS = {"name": "naps", "tasks": [{"id": "nap", "type": "sleep", "settings": {"units": 4}}]}


def submitted(workflow: dict[str, Any] = NAPS, **options: Any) -> Run:
    """A run recorded, its keys and reuse planned as `submit_run` does."""
    nodes = [Node(name="local", cores=2, memory_gb=4)]
    run, _ = create_run(
        identity=factories.person(), workflow=workflow, sources=[], nodes=nodes, **options
    )
    plan_reuse(run_id=run.pk, environment="service")
    return Run.objects.get(pk=run.pk)


def mark_done(run: Run, *names: str) -> None:
    """Units done as the harness leaves them: output in units/, name in ledger/done/."""
    paths = task_paths(run.pk, "nap")
    paths.done.mkdir(parents=True, exist_ok=True)
    for name in names:
        paths.unit_dir(name).mkdir(parents=True)
        (paths.unit_dir(name) / "unit.json").write_text(name)
        (paths.done / name).touch()


def reused(run: Run) -> dict[str, list[str]]:
    return dict(run.tasks.get(task_id="nap").reused)


def test_done_units_of_an_earlier_run_are_planned_and_the_rest_computed(store: Path) -> None:
    earlier = submitted()
    mark_done(earlier, "u000000", "u000002")
    task_paths(earlier.pk, "nap").unit_dir("u000003").mkdir(parents=True)  # not done

    run = submitted()

    assert reused(run) == {earlier.pk: ["u000000", "u000002"]}
    plan = json.loads((task_paths(run.pk, "nap").root / REUSE_FILE).read_text())
    assert plan == {
        "units": {n: f"runs/{earlier.pk}/tasks/nap/units/{n}" for n in ("u000000", "u000002")}
    }
    keys = json.loads((task_paths(run.pk, "nap").root / KEYS_FILE).read_text())
    assert sorted(keys) == ["u000000", "u000001", "u000002", "u000003"]


def test_a_unit_whose_key_differs_is_not_reused(store: Path) -> None:
    earlier = submitted()
    mark_done(earlier, "u000000", "u000001")
    paths = task_paths(earlier.pk, "nap")
    keys = json.loads((paths.root / KEYS_FILE).read_text())
    keys["u000001"] = "0" * 64
    (paths.root / KEYS_FILE).write_text(json.dumps(keys))

    assert reused(submitted()) == {earlier.pk: ["u000000"]}


def test_the_resumed_run_comes_before_newer_ones(store: Path) -> None:
    older = submitted()
    newer = submitted()
    mark_done(older, "u000000", "u000001")
    mark_done(newer, "u000000", "u000001", "u000002")

    resumed = submitted(resume_from=older.pk)

    assert reused(resumed) == {older.pk: ["u000000", "u000001"], newer.pk: ["u000002"]}
    assert reused(submitted()) == {newer.pk: ["u000000", "u000001", "u000002"]}


def test_reuse_off_plans_nothing_but_keys_its_units_for_later_runs(store: Path) -> None:
    earlier = submitted()
    mark_done(earlier, "u000000")

    off = submitted(reuse=False)

    assert reused(off) == {}
    assert not (task_paths(off.pk, "nap").root / REUSE_FILE).exists()
    mark_done(off, "u000001")
    assert reused(submitted()) == {earlier.pk: ["u000000"], off.pk: ["u000001"]}


def test_a_changed_setting_reuses_nothing(store: Path) -> None:
    mark_done(submitted(), "u000000")
    changed = {"name": "naps", "tasks": [{**NAPS["tasks"][0], "settings": {"units": 5}}]}
    assert reused(submitted(changed)) == {}


def test_a_resumed_submission_plans_once(store: Path) -> None:
    run = submitted()
    key = run.tasks.get(task_id="nap").key
    mark_done(submitted(), "u000000")  # a source appears after the first planning

    plan_reuse(run_id=run.pk, environment="service")

    task = Run.objects.get(pk=run.pk).tasks.get(task_id="nap")
    assert (task.key, task.reused) == (key, {})


def test_a_split_task_whose_units_this_process_cannot_list_is_computed_whole(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker without the plugin (installed after it started, or failing to import here)
    does not fail the run: the task gets no keys, reuses nothing and is never reused."""
    earlier = submitted()
    mark_done(earlier, "u000000")
    run, _ = create_run(
        identity=factories.person(),
        workflow=NAPS,
        sources=[],
        nodes=[Node(name="local", cores=2, memory_gb=4)],
    )
    monkeypatch.setattr("runs.services.reuse.registry", lambda: {})  # the type unknown here
    plan_reuse(run_id=run.pk, environment="service")

    task = run.tasks.get(task_id="nap")
    assert (task.key, task.reused) == ("", {})
    assert not (task_paths(run.pk, "nap").root / REUSE_FILE).exists()
    assert not (task_paths(run.pk, "nap").root / KEYS_FILE).exists()

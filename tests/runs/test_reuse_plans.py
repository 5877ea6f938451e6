"""What a submission decides to reuse (`plan_reuse`), on runs whose units are marked done in
the store as the harness leaves them: only done units with the same unit key, the resumed
run first, nothing with reuse off, and recorded once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pytest_django import Settings

from runs.models import Run
from runs.plans import Node
from runs.services.reuse import plan_reuse
from runs.services.submission import SubmissionRefused, create_run
from runs.store import task_paths
from simrun_harness.reuse import KEYS_FILE, OLD_KEYS_FILE, REUSE_FILE
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


def reused(run: Run) -> dict[str, list[list[int]]]:
    """Run → ranges [start, end) of the unit indices reused from it."""
    return dict(run.tasks.get(task_id="nap").reused)


def keys_of(run: Run) -> list[str]:
    return (task_paths(run.pk, "nap").root / KEYS_FILE).read_text().splitlines()


def test_done_units_of_an_earlier_run_are_planned_and_the_rest_computed(store: Path) -> None:
    earlier = submitted()
    mark_done(earlier, "u000000", "u000002")
    task_paths(earlier.pk, "nap").unit_dir("u000003").mkdir(parents=True)  # not done

    run = submitted()

    assert reused(run) == {earlier.pk: [[0, 1], [2, 3]]}
    plan = json.loads((task_paths(run.pk, "nap").root / REUSE_FILE).read_text())
    assert plan == {"from": [[f"runs/{earlier.pk}/tasks/nap", [[0, 1], [2, 3]]]]}
    assert len(keys_of(run)) == 4
    assert keys_of(run) == keys_of(earlier)


def test_a_unit_whose_key_differs_is_not_reused(store: Path) -> None:
    earlier = submitted()
    mark_done(earlier, "u000000", "u000001")
    paths = task_paths(earlier.pk, "nap")
    keys = keys_of(earlier)
    keys[1] = "0" * 64
    (paths.root / KEYS_FILE).write_text("".join(f"{k}\n" for k in keys))

    assert reused(submitted()) == {earlier.pk: [[0, 1]]}


def test_the_resumed_run_comes_before_newer_ones(store: Path) -> None:
    older = submitted()
    newer = submitted()
    mark_done(older, "u000000", "u000001")
    mark_done(newer, "u000000", "u000001", "u000002")

    resumed = submitted(resume_from=older.pk)

    assert reused(resumed) == {older.pk: [[0, 2]], newer.pk: [[2, 3]]}
    assert reused(submitted()) == {newer.pk: [[0, 3]]}


def test_reuse_off_plans_nothing_but_keys_its_units_for_later_runs(store: Path) -> None:
    earlier = submitted()
    mark_done(earlier, "u000000")

    off = submitted(reuse=False)

    assert reused(off) == {}
    assert not (task_paths(off.pk, "nap").root / REUSE_FILE).exists()
    mark_done(off, "u000001")
    assert reused(submitted()) == {earlier.pk: [[0, 1]], off.pk: [[1, 2]]}


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


def test_the_keys_of_an_earlier_simrun_are_read_too(store: Path) -> None:
    """A run keyed before the keys were one a line (one JSON object of unit names) is still
    a source."""
    earlier = submitted()
    mark_done(earlier, "u000001")
    paths = task_paths(earlier.pk, "nap")
    old = {f"u{i:06d}": key for i, key in enumerate(keys_of(earlier))}
    (paths.root / OLD_KEYS_FILE).write_text(json.dumps(old))
    (paths.root / KEYS_FILE).unlink()

    assert reused(submitted()) == {earlier.pk: [[1, 2]]}


def test_settings_written_differently_but_meaning_the_same_give_one_key(store: Path) -> None:
    """The key holds the settings as the type's model keys them: a float written as a whole
    number, the keys in another order, a default written or left out are the same task."""
    first = {"id": "nap", "type": "sleep", "settings": {"units": 4, "seconds": 1}}
    same = [
        {"seconds": 1.0, "units": 4},
        {"units": 4, "seconds": 1, "merge_seconds": 0},
        {"seconds": 1.0, "merge_seconds": 0.0, "units": 4},
    ]
    earlier = submitted({"name": "naps", "tasks": [first]})
    mark_done(earlier, "u000000", "u000001", "u000002", "u000003")
    key = earlier.tasks.get().key

    for settings in same:
        again = submitted({"name": "naps", "tasks": [{**first, "settings": settings}]})
        assert again.tasks.get().key == key, settings
        assert reused(again) == {earlier.pk: [[0, 4]]}, settings


def note(run: Run, task_id: str = "nap") -> dict[str, Any]:
    return dict(run.tasks.get(task_id=task_id).reuse_note)


def test_a_miss_names_the_setting_that_differs_from_the_earlier_run(store: Path) -> None:
    """Reuse explains itself: fewer units reused than the task has, and the first part of the
    key that differs from the run it is compared with (the newest earlier run of the name)."""
    earlier = submitted()
    mark_done(earlier, "u000000", "u000001", "u000002", "u000003")
    changed = {
        "name": "naps",
        "tasks": [{**NAPS["tasks"][0], "settings": {"units": 4, "seconds": 2}}],
    }

    run = submitted(changed)

    assert note(run)["compared_with"] == earlier.pk
    assert note(run)["differs"] == {
        "part": "setting",
        "name": "seconds",
        "here": "2.0",
        "there": "0.1",
    }
    assert note(run)["text"] == (
        f"reused 0 of 4: setting 'seconds' differs from run {earlier.pk}'s (2.0 here, 0.1 there)"
    )


def test_a_hit_says_where_from_and_a_partial_one_what_was_not_done(store: Path) -> None:
    earlier = submitted()
    mark_done(earlier, "u000000", "u000001")

    run = submitted(resume_from=earlier.pk)

    assert note(run)["text"] == (
        f"reused 2 of 4: the key is run {earlier.pk}'s; 2 unit(s) were not done there "
        "(or their outputs are gone)"
    )
    mark_done(run, "u000002", "u000003")
    assert (
        note(submitted(resume_from=run.pk))["text"] == f"reused all 4 from {earlier.pk}, {run.pk}"
    )


def test_a_miss_of_a_task_after_names_the_upstream_task(store: Path) -> None:
    chain = {
        "name": "chain",
        "tasks": [
            {"id": "nap", "type": "sleep", "settings": {"units": 2}},
            {"id": "more", "type": "summary", "inputs": {"scan": "nap"}},
        ],
    }
    submitted(chain)
    chain["tasks"][0]["settings"] = {"units": 3}

    run = submitted(chain)

    assert note(run, "more")["differs"]["part"] == "upstream"
    assert "its input 'scan' reads task 'nap', whose key differs" in note(run, "more")["text"]


def test_an_earlier_runs_files_replaced_by_links_are_not_read_for_reuse(
    store: Path, tmp_path: Path
) -> None:
    """An earlier run's code made its unit keys and a unit output links (to copies outside
    the store): the planner follows neither, and plans to compute those units."""
    earlier = submitted()
    mark_done(earlier, "u000000", "u000001")
    paths = task_paths(earlier.pk, "nap")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / KEYS_FILE).write_bytes((paths.root / KEYS_FILE).read_bytes())
    (paths.root / KEYS_FILE).unlink()
    (paths.root / KEYS_FILE).symlink_to(outside / KEYS_FILE)
    again = submitted()
    mark_done(again, "u000002")
    (outside / "u000002").mkdir()
    again_paths = task_paths(again.pk, "nap")
    shutil.rmtree(again_paths.unit_dir("u000002"))
    again_paths.unit_dir("u000002").symlink_to(outside / "u000002")

    assert reused(submitted()) == {}


def test_matching_the_units_of_a_large_task_holds_a_few_bytes_a_unit(store: Path) -> None:
    """A task of many units is matched with an earlier one streamed: its keys read line by line,
    a byte a unit for what was found, its units' names made at each look (a million names
    held were 64 MB of the worker's memory)."""
    import tracemalloc

    units = 50_000
    wide = {"name": "wide", "tasks": [{"id": "nap", "type": "sleep", "settings": {"units": units}}]}
    earlier = submitted(wide)
    mark_done(earlier, "u000001", f"u{units - 1:06d}")
    nodes = [Node(name="local", cores=2, memory_gb=4)]
    run, _ = create_run(identity=factories.person(), workflow=wide, sources=[], nodes=nodes)

    tracemalloc.start()
    try:
        plan_reuse(run_id=run.pk, environment="service")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert reused(Run.objects.get(pk=run.pk)) == {earlier.pk: [[1, 2], [units - 1, units]]}
    # a few bytes a unit above what any task costs (a MiB of the plugin host's answer read):
    # the names of the units held were 64 bytes a unit
    assert peak < 2 * 1024 * 1024 + 8 * units, f"{peak / units:.0f} bytes a unit"


def test_units_the_model_s_environment_refuses_refuse_the_submission_naming_the_task(
    store: Path, settings: Settings
) -> None:
    """The units are listed again in the model's environment when the run is keyed: what it
    refuses there (here more units than the limit now allows) refuses the submission, naming
    the task and where it was refused, and no key is written."""
    nodes = [Node(name="local", cores=2, memory_gb=4)]
    run, _ = create_run(identity=factories.person(), workflow=NAPS, sources=[], nodes=nodes)
    settings.SIMRUN_MAX_UNITS_PER_TASK = 3

    with pytest.raises(SubmissionRefused) as refused:
        plan_reuse(run_id=run.pk, environment="service")

    assert str(refused.value).startswith("task 'nap': 4 units, more than the 3 a task may have")
    assert str(refused.value).endswith(" (in the model's environment)")
    assert run.tasks.get().key == ""


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        (
            {"reuse": False, "resume_from": "earlier"},
            "resume_from: a resumed run reuses done units; it cannot be combined with no reuse"
            " (--resume with --no-reuse)",
        ),
        ({"resume_from": "nosuchrun"}, "resume_from: no run 'nosuchrun' (--resume RUN)"),
    ],
)
def test_a_resume_without_reuse_or_of_no_run_is_refused_recording_nothing(
    store: Path, options: dict[str, Any], refusal: str
) -> None:
    earlier = submitted()
    if options["resume_from"] == "earlier":
        options = {**options, "resume_from": earlier.pk}

    with pytest.raises(SubmissionRefused) as refused:
        submitted(**options)

    assert str(refused.value) == refusal
    assert list(Run.objects.values_list("pk", flat=True)) == [earlier.pk]

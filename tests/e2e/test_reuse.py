"""Reuse of done work on the local backend, for real (docs/reuse.md): a run again reuses every
unit; a changed setting recomputes its task and those after it; a run cancelled half way and
resumed gives a clean run's outputs byte for byte; deleting the source run breaks nothing."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from runs.cli.main import main
from runs.models import Run
from runs.selectors.reuse import run_reuse
from runs.services.runs import cancel_run, finish_deletion, request_deletion
from runs.store import reports, task_paths
from simrun_harness.ledger_reads import counts
from tests import factories
from tests.api.live import serving
from tests.e2e.conftest import Services, wait_for_end
from tests.e2e.test_local_runs import SCAN, submit
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

SCAN_AND_SUMMARY = {
    "name": "ode",
    "tasks": [
        {**SCAN, "split": "none"},
        {"id": "summary", "type": "summary", "inputs": {"scan": "scan"}},
    ],
}


def outputs(run: Run) -> dict[str, bytes]:
    """Every output file of a run (its tasks' out/), by path below the run, but the marker."""
    root = task_paths(run.pk, "x").root.parent
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.glob("*/out/**/*"))
        if path.is_file() and path.name != ".simrun-merged"
    }


def computed(run: Run, task_id: str) -> int:
    """Units the workers of a task computed (reused units are no worker's)."""
    return sum(report.units_done for _, report in reports(task_paths(run.pk, task_id)))


def succeeded(workflow: dict[str, Any], **options: Any) -> Run:
    run = wait_for_end(submit(workflow, **options).pk)
    assert run.state == "succeeded", run.message
    return run


def test_a_run_again_reuses_every_unit_and_survives_deleting_its_source(
    services: Services, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first = succeeded(SCAN_AND_SUMMARY)
    assert run_reuse(first).text == "reused 0 of 7 units"
    expected = outputs(first)

    again = succeeded(SCAN_AND_SUMMARY)

    view = run_reuse(again)
    assert (view.text, view.sources) == ("reused 7 of 7 units", {first.pk: 7})
    assert computed(again, "scan") == 0
    assert outputs(again) == expected
    # a changed setting: the scan is reused, the summary after it computed again
    changed = copy.deepcopy(SCAN_AND_SUMMARY)
    changed["tasks"][1]["settings"] = {"threshold": 2.0}
    summary_changed = succeeded(changed)
    assert run_reuse(summary_changed).text == "reused 6 of 7 units"
    assert summary_changed.tasks.get(task_id="summary").reused == {}
    with serving() as url:  # `simrun show` as a person would type it, over the API
        monkeypatch.setenv("SIMRUN_URL", url)
        monkeypatch.setenv("SIMRUN_TOKEN", factories.token(factories.owner()).secret)
        assert main(["show", again.pk]) == 0
        assert main(["show", summary_changed.pk]) == 0
    said = capsys.readouterr().out
    assert f"reused 7 of 7 units (7 from {first.pk})" in said
    # per task, why fewer units were reused than it has: the setting that differs, by name
    assert f"reused 0 of 1: setting 'threshold' differs from run {again.pk}'s" in said, said

    # cleanup of the source keeps what links to it readable
    request_deletion(run_id=first.pk, identity=factories.owner())
    finish_deletion(run_id=first.pk)  # what its delete_run task does
    assert not task_paths(first.pk, "scan").root.exists()
    assert outputs(again) == expected
    unit = task_paths(again.pk, "scan").unit_dir("u000000") / "points.nc"
    assert unit.stat().st_size > 0 and unit.read_bytes()


def test_a_run_cancelled_half_way_and_resumed_equals_a_clean_run(services: Services) -> None:
    naps = {"id": "nap", "type": "sleep", "settings": {"units": 12, "seconds": 0.5}}
    workflow = {"name": "naps", "tasks": [{**naps, "split": "none"}]}
    cancelled = submit(workflow)
    paths = task_paths(cancelled.pk, "nap")

    def half_done() -> bool:
        found = counts(paths)
        return found is not None and found.done >= 6

    wait_for(half_done, what="half of the units done", timeout=120)
    cancel_run(run_id=cancelled.pk, identity=factories.person())
    wait_for_end(cancelled.pk)
    done = counts(paths)
    assert done is not None and 6 <= done.done < 12

    resumed = succeeded(workflow, resume_from=cancelled.pk)
    clean = succeeded(workflow, reuse=False)  # --no-reuse: every unit computed
    assert run_reuse(clean).text == "reused 0 of 12 units"
    assert computed(clean, "nap") == 12

    view = run_reuse(resumed)
    assert view.reused >= done.done and view.sources == {cancelled.pk: view.reused}
    assert computed(resumed, "nap") == 12 - view.reused
    assert outputs(resumed) == outputs(clean)
    assert Run.objects.get(pk=resumed.pk).resume_from == cancelled.pk


def test_outputs_are_compared_below_the_run(tmp_path: Path, settings: Any) -> None:
    """The helper above finds outputs: a comparison of nothing would prove nothing."""
    settings.SIMRUN_STORE = tmp_path
    run = Run(id="r1")
    out = task_paths(run.pk, "t").out
    out.mkdir(parents=True)
    (out / "a.json").write_text("1")
    (out / ".simrun-merged").write_text("{}")
    assert outputs(run) == {"t/out/a.json": b"1"}

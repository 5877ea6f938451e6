"""Reuse in the harness: the units `reuse.json` lists are linked, not computed, and never
claimed; an unsplit task links its whole output (docs/reuse.md)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from simrun_harness.exits import EXIT_OK
from simrun_harness.layout import MERGE_MARKER, TaskPaths
from simrun_harness.ledger import unit_names
from simrun_harness.ledger_reads import counts
from simrun_harness.output import is_published
from simrun_harness.reuse import REUSE_FILE, link_output, link_units
from tests.harness.conftest import Store

SLEEP = {"units": 6, "seconds": 0.0}


def _earlier_run(run_store: Store, run_id: str = "r0") -> Store:
    """A finished run `r0` of the same task in the same store."""
    earlier = Store(run_store.root, run_id=run_id, started=run_store.started)
    earlier.write_task("sleep", SLEEP)
    assert earlier.run("simrun-worker", earlier.env(SIMRUN_COORDINATOR_MERGES="1")) == EXIT_OK
    return earlier


def _plan(paths: TaskPaths, units: dict[str, str]) -> None:
    paths.root.mkdir(parents=True, exist_ok=True)
    (paths.root / REUSE_FILE).write_text(json.dumps({"units": units}))


def test_listed_units_are_linked_done_before_any_claim_and_the_rest_computed(
    run_store: Store,
) -> None:
    earlier = _earlier_run(run_store)
    reused = ["u000000", "u000002", "u000003"]
    paths = run_store.write_task("sleep", SLEEP)
    _plan(paths, {n: f"runs/r0/tasks/t/units/{n}" for n in reused})

    env = run_store.env(SIMRUN_COORDINATOR_MERGES="1")
    assert run_store.run("simrun-worker", env) == EXIT_OK

    assert run_store.report("t-w0").units_done == 3  # only the others were computed
    assert sorted(run_store.done_units()) == ["u000001", "u000004", "u000005"]
    before = earlier.task()
    for name in reused:  # hard links of the earlier outputs, not copies
        mine = paths.unit_dir(name) / "unit.json"
        assert os.stat(mine).st_ino == os.stat(before.unit_dir(name) / "unit.json").st_ino
    found = counts(paths)
    assert found is not None and found.done == 6
    assert (paths.out / "units.json").read_bytes() == (before.out / "units.json").read_bytes()


def test_a_listed_unit_whose_source_is_gone_is_computed(run_store: Store) -> None:
    paths = run_store.write_task("sleep", SLEEP)
    _plan(paths, {"u000001": "runs/gone/tasks/t/units/u000001"})

    linked = link_units(paths, run_store.root, unit_names(6))

    assert linked == set()
    assert not paths.unit_dir("u000001").exists()


def test_an_unsplit_task_links_the_earlier_output_and_runs_nothing(run_store: Store) -> None:
    earlier = Store(run_store.root, run_id="r0", started=run_store.started)
    source = earlier.task("summary").out
    source.mkdir(parents=True)
    (source / "summary.json").write_text('{"points": 4}')
    (source / ".simrun-merged").write_text("{}")
    # no input at all: running the type would fail, so success proves it was not run
    paths = run_store.write_task("summary", {}, task_id="summary")
    (paths.root / REUSE_FILE).write_text(json.dumps({"out": "runs/r0/tasks/summary/out"}))
    env = run_store.env("summary", task_id="summary")
    for name in ("SIMRUN_WORKER", "SIMRUN_ROLE", "SIMRUN_STALE_S", "SIMRUN_PROCESSES"):
        env.pop(name)

    assert run_store.run("simrun-exec", env) == EXIT_OK

    assert is_published(paths)
    assert (paths.out / "summary.json").read_text() == '{"points": 4}'
    assert os.stat(paths.out / "summary.json").st_ino == os.stat(source / "summary.json").st_ino


def _secret(run_store: Store) -> Path:
    """A directory outside the store with a file no run may read."""
    folder = run_store.root.parent / "elsewhere"
    folder.mkdir(exist_ok=True)
    (folder / "secret.txt").write_text("the service's key\n")
    (folder / MERGE_MARKER).write_text("{}")
    return folder


def test_a_planned_unit_replaced_by_a_link_out_of_the_store_is_computed_not_followed(
    run_store: Store,
) -> None:
    """An earlier run's code made its unit output a link: nothing behind it is linked in."""
    earlier = _earlier_run(run_store)
    unit = earlier.task().unit_dir("u000001")
    shutil.rmtree(unit)
    unit.symlink_to(_secret(run_store))
    paths = run_store.write_task("sleep", SLEEP)
    _plan(paths, {"u000001": "runs/r0/tasks/t/units/u000001"})

    linked = link_units(paths, run_store.root, unit_names(6))

    assert linked == set()
    assert not paths.unit_dir("u000001").exists()


def test_links_devices_and_fifos_in_a_reused_unit_are_not_carried_over(
    run_store: Store,
) -> None:
    earlier = _earlier_run(run_store)
    unit = earlier.task().unit_dir("u000002")
    (unit / "key").symlink_to(_secret(run_store) / "secret.txt")
    (unit / "nested").mkdir()
    (unit / "nested" / "root").symlink_to("/")
    os.mkfifo(unit / "pipe")
    paths = run_store.write_task("sleep", SLEEP)
    _plan(paths, {"u000002": "runs/r0/tasks/t/units/u000002"})

    assert link_units(paths, run_store.root, unit_names(6)) == {"u000002"}

    mine = paths.unit_dir("u000002")
    assert sorted(p.name for p in mine.rglob("*")) == ["nested", "unit.json"]


def test_an_earlier_output_replaced_by_a_link_is_not_reused(run_store: Store) -> None:
    earlier = Store(run_store.root, run_id="r0", started=run_store.started)
    out = earlier.task("summary").out
    out.parent.mkdir(parents=True)
    out.symlink_to(_secret(run_store))
    paths = run_store.write_task("summary", {}, task_id="summary")
    (paths.root / REUSE_FILE).write_text(json.dumps({"out": "runs/r0/tasks/summary/out"}))
    tmp = paths.root / ".out-partial-test"
    tmp.mkdir()

    assert link_output(paths, run_store.root, tmp) is False
    assert list(tmp.iterdir()) == []

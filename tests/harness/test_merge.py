"""simrun-merge: the marker comes last, a killed merge is redone, a repeated one is harmless."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
from pathlib import Path

import pytest

from simrun_harness.exits import EXIT_FAILED, EXIT_OK
from simrun_harness.jobs import Job
from simrun_harness.layout import MERGE_MARKER, TaskPaths
from simrun_harness.ledger import unit_names
from simrun_harness.ledger_reads import UnitDirs
from simrun_harness.output import PARTIAL_PREFIX, is_published
from tests.harness.conftest import Store, expected_counting_output, out_files
from tests.waiting import wait_for


def _partial_files(paths: TaskPaths) -> int:
    partial = [paths.root / n for n in os.listdir(paths.root) if n.startswith(PARTIAL_PREFIX)]
    return sum(len(os.listdir(p)) for p in partial if p.is_dir())


def _merge_env(run_store: Store) -> dict[str, str]:
    env = run_store.env("t-merge")
    for name in ("SIMRUN_WORKER", "SIMRUN_ROLE", "SIMRUN_STALE_S", "SIMRUN_PROCESSES"):
        env.pop(name)
    return env


def _refused_merge(run_store: Store, paths: TaskPaths) -> str:
    """Run `simrun-merge`, which must fail and publish nothing; the error its report gives."""
    assert run_store.run("simrun-merge", _merge_env(run_store)) == EXIT_FAILED
    assert not paths.out.exists()
    report = run_store.report("t-merge")
    assert report.error is not None
    return report.error.message


def test_a_merge_killed_half_way_and_run_again_gives_the_whole_output_marker_last(
    run_store: Store,
) -> None:
    paths = run_store.write_task("sleep", {"units": 6, "seconds": 0, "merge_seconds": 2.4})
    assert run_store.run("simrun-worker", run_store.env("t-w0", processes=2)) == EXIT_OK
    merge = run_store.start("simrun-merge", _merge_env(run_store))
    wait_for(lambda: _partial_files(paths) >= 2, timeout=60, what="half a merge")

    merge.signal_group(signal.SIGKILL)
    merge.wait()

    assert not is_published(paths)
    assert not paths.out.exists()
    assert run_store.run("simrun-merge", _merge_env(run_store)) == EXIT_OK
    assert out_files(paths) == expected_counting_output(6)
    marker = paths.merge_marker.stat().st_mtime_ns
    assert all(marker >= p.stat().st_mtime_ns for p in paths.out.iterdir())
    assert _partial_files(paths) == 0
    assert run_store.report("t-merge").role == "merge"


def test_a_repeated_merge_is_harmless(run_store: Store) -> None:
    paths = run_store.write_task("sleep", {"units": 3, "seconds": 0})
    env = run_store.env("t-w0", SIMRUN_COORDINATOR_MERGES="1")
    assert run_store.run("simrun-worker", env) == EXIT_OK
    assert is_published(paths)
    before = {p.name: p.stat().st_mtime_ns for p in paths.out.iterdir()}

    assert run_store.run("simrun-merge", _merge_env(run_store)) == EXIT_OK

    assert {p.name: p.stat().st_mtime_ns for p in paths.out.iterdir()} == before
    assert MERGE_MARKER in before
    assert out_files(paths) == expected_counting_output(3)


def test_a_merge_of_an_unfinished_ledger_fails_and_publishes_nothing(run_store: Store) -> None:
    paths = run_store.write_task("sleep", {"units": 3, "seconds": 0})
    assert run_store.run("simrun-worker", run_store.env("t-w0")) == EXIT_OK
    os.rename(paths.done / "u000002", paths.pending / "u000002")

    message = _refused_merge(run_store, paths)

    assert "1 of 3 units are not done" in message


def test_a_merge_missing_several_units_names_the_first_of_them(run_store: Store) -> None:
    paths = run_store.write_task("sleep", {"units": 3, "seconds": 0})
    assert run_store.run("simrun-worker", run_store.env("t-w0")) == EXIT_OK
    for name in ("u000000", "u000002"):
        os.rename(paths.done / name, paths.pending / name)

    message = _refused_merge(run_store, paths)

    assert "2 of 3 units are not done (first: u000000)" in message


def test_a_unit_output_replaced_by_a_link_is_no_input_of_the_merge(
    run_store: Store, tmp_path: Path
) -> None:
    """A unit's code made its output a link out of the store: the merge does not read
    through it; it fails naming the unit and publishes nothing."""
    paths = run_store.write_task("sleep", {"units": 3, "seconds": 0})
    assert run_store.run("simrun-worker", run_store.env("t-w0")) == EXIT_OK
    outside = tmp_path / "outside"
    shutil.copytree(paths.unit_dir("u000001"), outside)
    shutil.rmtree(paths.unit_dir("u000001"))
    paths.unit_dir("u000001").symlink_to(outside)

    message = _refused_merge(run_store, paths)

    assert "1 of 3 units are not done (first: u000001)" in message


def test_a_merge_job_of_a_million_units_names_their_directory_not_each_unit() -> None:
    """What the coordinator sends its pool process for the merge (and gets back with the
    result) is a few hundred bytes whatever the units: a tuple of a million paths was ~60 MB
    pickled, twice, and held in both processes."""
    job = Job("merge", out="/store/t/.out", units="/store/t/units", unit_count=1_000_000)

    assert len(pickle.dumps(job)) < 512


def test_a_plugin_s_merge_is_given_every_unit_directory_in_unit_order(tmp_path: Path) -> None:
    """`merge(ctx, units, out)` gets a sequence of the unit directories, made at each look:
    its length, items, slices and iteration are those of the list it stands for."""
    dirs = UnitDirs(tmp_path / "units", 1_000_001)
    paths = TaskPaths(tmp_path)

    assert len(dirs) == 1_000_001
    assert dirs[0] == paths.unit_dir("u0000000") and dirs[-1] == paths.unit_dir("u1000000")
    assert dirs[3:5] == [paths.unit_dir("u0000003"), paths.unit_dir("u0000004")]
    assert list(UnitDirs(tmp_path / "units", 3)) == [paths.unit_dir(n) for n in unit_names(3)]
    with pytest.raises(IndexError):
        dirs[1_000_001]


def test_a_unit_done_in_the_ledger_whose_output_is_gone_or_no_directory_is_not_done(
    run_store: Store,
) -> None:
    """The ledger says done but the output is missing (u000001) or a plain file (u000002):
    the merge counts both, names the first and publishes nothing."""
    paths = run_store.write_task("sleep", {"units": 4, "seconds": 0})
    assert run_store.run("simrun-worker", run_store.env("t-w0")) == EXIT_OK
    shutil.rmtree(paths.unit_dir("u000001"))
    shutil.rmtree(paths.unit_dir("u000002"))
    paths.unit_dir("u000002").write_text("not a directory")
    (paths.units / "u0000001").mkdir()  # a name of another width is not u000001

    message = _refused_merge(run_store, paths)

    assert "2 of 4 units are not done (first: u000001)" in message


def test_a_units_directory_replaced_by_a_link_gives_the_merge_no_input(
    run_store: Store, tmp_path: Path
) -> None:
    """The whole `units/` made a link to a copy elsewhere: none of it is read."""
    paths = run_store.write_task("sleep", {"units": 3, "seconds": 0})
    assert run_store.run("simrun-worker", run_store.env("t-w0")) == EXIT_OK
    outside = tmp_path / "outside"
    shutil.move(paths.units, outside)
    paths.units.symlink_to(outside)

    message = _refused_merge(run_store, paths)

    assert "3 of 3 units are not done (first: u000000)" in message

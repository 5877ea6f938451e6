"""simrun-exec: an unsplit plugin task runs once into out/, marker last."""

from __future__ import annotations

import csv
import json

from simrun_examples.scan import OdeScan
from simrun_harness.exits import EXIT_ANALYSIS, EXIT_CONFIGURATION, EXIT_OK
from simrun_harness.output import is_published
from tests.harness.conftest import Store
from tests.harness.scans import run_in_process

SCAN = {"parameters": {"alpha": [5.0, 300.0], "n": [1.0, 3.0]}, "t_end": 80, "n_points": 161}


def _exec_env(run_store: Store, task_id: str) -> dict[str, str]:
    env = run_store.env(task_id, task_id=task_id)
    for name in ("SIMRUN_WORKER", "SIMRUN_ROLE", "SIMRUN_STALE_S", "SIMRUN_PROCESSES"):
        env.pop(name)
    return env


def test_summary_runs_once_on_its_input_into_out(run_store: Store) -> None:
    scan = run_store.task("scan")
    run_in_process(OdeScan(), SCAN, scan.root)
    paths = run_store.write_task(
        "summary", {"threshold": 1.0}, task_id="summary", inputs={"scan": "tasks/scan/out"}
    )

    assert run_store.run("simrun-exec", _exec_env(run_store, "summary")) == EXIT_OK

    assert is_published(paths)
    with (paths.out / "summary.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4 * 6
    overview = json.loads((paths.out / "summary.json").read_text())
    assert overview["points"] == 4
    assert 0 < overview["oscillating"]["p1"] < 4  # strong repression oscillates, n=1 does not
    report = run_store.report("summary", task_id="summary")
    assert report.role == "exec" and report.exit_code == EXIT_OK and report.processes == 1


def test_an_unsplit_run_that_raises_exits_3_and_publishes_nothing(run_store: Store) -> None:
    scan = run_store.task("scan")
    scan.out.mkdir(parents=True)
    (scan.out / "scan.nc").write_bytes(b"not a netCDF file")
    paths = run_store.write_task(
        "summary", {}, task_id="summary", inputs={"scan": "tasks/scan/out"}
    )

    assert run_store.run("simrun-exec", _exec_env(run_store, "summary")) == EXIT_ANALYSIS

    assert not paths.out.exists()
    report = run_store.report("summary", task_id="summary")
    assert report.exit_code == EXIT_ANALYSIS
    assert report.error is not None and report.error.traceback


def test_a_plugin_settings_error_exits_4(run_store: Store) -> None:
    run_store.task("scan").out.mkdir(parents=True)  # an input without its scan.nc
    run_store.write_task("summary", {}, task_id="summary", inputs={"scan": "tasks/scan/out"})

    assert run_store.run("simrun-exec", _exec_env(run_store, "summary")) == EXIT_CONFIGURATION

    report = run_store.report("summary", task_id="summary")
    assert report.error is not None and "scan.nc" in report.error.message

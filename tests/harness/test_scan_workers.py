"""The example SBML scan shared by three workers equals the same scan run by one."""

from __future__ import annotations

from collections import Counter

import numpy as np
import xarray as xr

from simrun_harness.exits import EXIT_OK
from simrun_harness.ledger_reads import LedgerCounts, counts
from tests.harness.conftest import Store

SCAN = {
    "parameters": {"alpha": {"start": 20, "stop": 400, "num": 6}, "n": [1.5, 2.5, 3.0]},
    "t_end": 60.0,
    "n_points": 61,
    "chunk": 1,
}


def _scan(run_store: Store, task_id: str) -> xr.Dataset:
    with xr.open_dataset(run_store.task(task_id).out / "scan.nc", engine="scipy") as opened:
        return opened.load()


def test_three_workers_merge_every_unit_once_and_equal_a_single_worker_run(
    run_store: Store,
) -> None:
    model = run_store.add_model("repressilator")
    shared = run_store.write_task("sbml_scan", SCAN, task_id="shared", model=model)
    run_store.write_task("sbml_scan", SCAN, task_id="single", model=model)
    extras = [
        run_store.start(
            "simrun-worker", run_store.env(f"shared-w{i}", task_id="shared", role="extra")
        )
        for i in (1, 2)
    ]
    for extra in extras:
        extra.wait_log("waiting for the ledger")
    coordinator = run_store.start(
        "simrun-worker",
        run_store.env("shared-w0", task_id="shared", SIMRUN_COORDINATOR_MERGES="1"),
    )
    single = run_store.start(
        "simrun-worker",
        run_store.env("single-w0", task_id="single", SIMRUN_COORDINATOR_MERGES="1"),
    )

    assert [p.wait() for p in (coordinator, *extras, single)] == [EXIT_OK] * 4
    assert counts(shared) == LedgerCounts(pending=0, claimed=0, done=18, total=18)
    assert Counter(run_store.done_units("shared")) == Counter({f"u{i:06d}": 1 for i in range(18)})
    reports = [run_store.report(f"shared-w{i}", task_id="shared") for i in range(3)]
    assert sum(r.units_done for r in reports) == 18
    merged, alone = _scan(run_store, "shared"), _scan(run_store, "single")
    assert list(merged["point"].values) == list(range(18))
    xr.testing.assert_equal(merged, alone)
    assert np.array_equal(merged["p1"].values, alone["p1"].values)

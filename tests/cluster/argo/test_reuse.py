"""Reuse on the cluster: the harness in the pods links what `reuse.json` lists, as locally
(docs/reuse.md); against the simulator, whose pods are real harness processes."""

from __future__ import annotations

import json

from runs.ports import WorkflowPhase
from simrun_harness.layout import StorePaths
from simrun_harness.reuse import REUSE_FILE
from tests.cluster.argo.builders import launch, shape, split_task, write_task
from tests.cluster.argo.lab import Lab
from tests.waiting import wait_for


def _run(lab: Lab, run_id: str) -> None:
    name = lab.backend.submit(launch(run_id, split_task("scan", 2, pod=shape(2, 1))))

    def ended() -> WorkflowPhase | None:
        phase = lab.backend.status(name).phase
        return phase if phase not in (WorkflowPhase.PENDING, WorkflowPhase.RUNNING) else None

    assert wait_for(ended, timeout=90) is WorkflowPhase.SUCCEEDED


def test_the_pods_of_a_split_task_link_the_listed_units_and_compute_the_rest(
    sim_lab: Lab,
) -> None:
    store = StorePaths(sim_lab.store)
    write_task(sim_lab.store, "r1", "scan", "sleep", units=6, seconds=0.1)
    _run(sim_lab, "r1")
    reused = ["u000000", "u000001", "u000004", "u000005"]
    root = write_task(sim_lab.store, "r2", "scan", "sleep", units=6, seconds=0.1)
    plan = {"units": {n: f"runs/r1/tasks/scan/units/{n}" for n in reused}}
    (root / REUSE_FILE).write_text(json.dumps(plan))

    _run(sim_lab, "r2")

    earlier, task = store.run("r1").task("scan"), store.run("r2").task("scan")
    computed = sum(
        json.loads(p.read_text())["units_done"]
        for p in task.reports.iterdir()
        if p.name.startswith("scan-w")
    )
    assert computed == 2
    assert (task.out / "units.json").read_bytes() == (earlier.out / "units.json").read_bytes()
    for name in reused:
        mine, theirs = task.unit_dir(name) / "unit.json", earlier.unit_dir(name) / "unit.json"
        assert mine.stat().st_ino == theirs.stat().st_ino

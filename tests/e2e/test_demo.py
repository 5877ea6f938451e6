"""The README's main job, as a user runs it: `simrun demo` on the embedded default.

No PostgreSQL, no Redis: the command runs with a clean environment and its own data
directory, as on a fresh machine (SQLite, the file broker, the local backend).
"""

from __future__ import annotations

import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from runs.crates.profiles import DECLARED, KNOWN
from runs.crates.validation import METADATA_FILE
from tests.e2e.commands import (
    ROOT,
    SIMRUN,
    clean_env,
    demo,
    free_port,
    kill_all,
    processes_of,
    simrun,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

NAPS = """\
name: naps
tasks:
  - id: naps
    type: sleep
    settings: {units: 24, seconds: 1}
"""


def test_the_main_job_runs_the_example_and_says_where_everything_is(tmp_path: Path) -> None:
    """The example scan and its summary succeed; the command prints the state, the time,
    the outputs and how to keep the pages (no URL of services it stopped), and leaves no
    process behind. A second run reuses the
    environment the first one built, and leaves the services running (`--keep`): the first
    run exported through them (`simrun export RUN --out X.zip`) is valid for every profile its
    crate declares (`simrun crate validate X.zip`)."""
    data_dir = tmp_path / "simrun"
    port = free_port()
    try:
        first = demo(data_dir, port)

        assert first.returncode == 0, first.stdout + first.stderr
        assert re.search(r"^state: +succeeded$", first.stdout, re.M), first.stdout
        # no terminal here: the progress comes as plain lines, one per change of a task
        assert re.search(r"^ +scan +\d+/25 +running ", first.stdout, re.M), first.stdout
        assert re.search(r"^ +scan +25/25 +done ", first.stdout, re.M), first.stdout
        assert re.search(r"^ +summary +1/1 +done ", first.stdout, re.M), first.stdout
        assert re.search(r"^time: +[0-9.]+s from submission to the end$", first.stdout, re.M)
        run_id = re.search(r"submitted run (\w+) \(repressilator-scan\)", first.stdout)
        assert run_id, first.stdout
        outputs = data_dir / "store" / "runs" / run_id[1] / "tasks"
        assert (outputs / "scan" / "out" / "scan.nc").is_file()
        rows = (outputs / "summary" / "out" / "summary.csv").read_text().splitlines()[1:]
        assert {row.split(",")[0] for row in rows} == {str(p) for p in range(40 * 25)}
        # Outputs as real paths, and one time from submission, said twice
        assert f"          {outputs / 'summary' / 'out' / 'summary.csv'}\n" in first.stdout
        assert "<task>" not in first.stdout
        took = re.search(r"^time: +([0-9.]+)s from submission to the end$", first.stdout, re.M)
        assert took and f"run {run_id[1]} succeeded {took[1]}s after submission" in first.stdout
        # the services stopped with it: no URL that would not answer, but how to keep them
        assert f"http://127.0.0.1:{port}/" not in first.stdout.split("state:")[-1]
        assert "pages:    the services stop with the demo: `simrun demo --keep`" in first.stdout
        wait_for(
            lambda: not processes_of(data_dir), timeout=30, what="every process of the demo gone"
        )

        second = demo(data_dir, port, "--keep")

        assert second.returncode == 0, second.stdout + second.stderr
        assert re.search(r"^state: +succeeded$", second.stdout, re.M), second.stdout
        environments = [p for p in (data_dir / "store" / "environments").iterdir() if p.is_dir()]
        assert len(environments) == 1, environments

        assert_the_crate_of_the_run_is_valid(data_dir, run_id[1], tmp_path / "demo.crate.zip")
        stopped = simrun(data_dir, "stop")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    finally:
        kill_all(data_dir)


def assert_the_crate_of_the_run_is_valid(data_dir: Path, run_id: str, archive: Path) -> None:
    """The demo's run (an `sbml_scan` of examples/models/repressilator and its summary)
    exported and validated as a user does: exit 0, the verdict `valid`, and a line `valid at
    the REQUIRED level (0 issues)` for every profile the crate declares."""
    exported = simrun(data_dir, "export", run_id, "--out", str(archive))

    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert f"exported run {run_id} to {archive}" in exported.stdout
    with zipfile.ZipFile(archive) as zipped:
        graph = {e["@id"]: e for e in json.loads(zipped.read(METADATA_FILE))["@graph"]}
        names = zipped.namelist()
    assert graph["./"]["mainEntity"] == {"@id": "workflow.json"}
    assert any(n.startswith("snapshots/") and n.endswith("/repressilator.ant") for n in names)
    assert "tasks/scan/out/scan.nc" in names and "tasks/summary/out/summary.csv" in names
    declared = {ref["@id"] for e in (graph["./"], graph[METADATA_FILE]) for ref in e["conformsTo"]}
    assert {p.uri for p in DECLARED} <= declared

    checked = simrun(data_dir, "crate", "validate", str(archive))

    assert checked.returncode == 0, checked.stdout + checked.stderr
    lines = checked.stdout.splitlines()
    assert lines[-1] == "valid", checked.stdout
    for uri in sorted(declared):
        line = f"{KNOWN[uri].validator_id}: valid at the REQUIRED level (0 issues)"
        assert line in lines, checked.stdout
    assert len(lines) == len(declared) + 1, checked.stdout  # no issue, no skipped check


def test_the_main_job_goes_on_when_its_worker_is_killed(tmp_path: Path) -> None:
    """The Celery worker killed while the run is followed is started again by the serve the
    demo runs (said in logs/serve.log with its exit code and log), and the run succeeds."""
    data_dir = tmp_path / "simrun"
    source = tmp_path / "model"
    source.mkdir()
    (source / "README.md").write_text("no environment of its own\n")
    # long enough to be followed past the kill, short enough not to sleep the suite away
    workflow = tmp_path / "naps.yaml"
    workflow.write_text(NAPS)
    command = [
        str(SIMRUN),
        "demo",
        "--port",
        str(free_port()),
        "--workflow",
        str(workflow),
        "--source",
        str(source),
    ]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=clean_env(data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        claimed = data_dir / "store" / "runs"
        wait_for(
            lambda: list(claimed.glob("*/tasks/naps/ledger/claimed/*")),
            timeout=120,
            what="the run's first unit claimed",
        )
        # the command lines read by the scan: its list holds pods too, and one that ended since
        # would raise at a second look
        lines = {p: " ".join(p.info.get("cmdline") or []) for p in processes_of(data_dir)}
        celery = [p for p, line in lines.items() if "celery" in line and " beat" not in line]
        pids = {p.pid for p in celery}
        worker = next(p for p in celery if p.ppid() not in pids)  # not a pool process of it
        worker.kill()
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_all(data_dir)

    assert proc.returncode == 0, stdout + stderr
    assert re.search(r"^state: +succeeded$", stdout, re.M), stdout
    log = data_dir / "logs" / "worker.log"
    said = (data_dir / "logs" / "serve.log").read_text()
    assert f"simrun: the worker process exited with code -9; see {log}; restarting it" in said

"""Crates of real runs on the local backend (docs/provenance.md): valid for every profile they
declare, made into runs again that write the same bytes (here, or in another installation that
never saw the run), and a resumed run's crate says which units came from which run."""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from pytest_django import Settings

from runs.backends import backend
from runs.cli.main import main
from runs.cli.transfers import zip_crate
from runs.crates.validation import METADATA_FILE
from runs.models import Identity, Run, Snapshot
from runs.selectors.reuse import run_reuse
from runs.services.crate_runs import submit_crate
from runs.services.crates import export_to
from runs.services.runs import cancel_run
from runs.services.submission import create_run
from runs.snapshots import snapshot_directory
from runs.store import store, task_paths
from simrun_harness.ledger_reads import counts
from tests import factories
from tests.e2e.conftest import Services, _kill_pods, wait_for_end
from tests.e2e.test_local_runs import SCAN, submit
from tests.e2e.test_reuse import computed, outputs, succeeded
from tests.runs.cli.test_commands import simrun
from tests.runs.crates.crate_files import LIMITS
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

SCAN_AND_SUMMARY = {
    "name": "repressilator-ode-scan",
    "description": "The example scan, small: 18 points of the repressilator, then statistics.",
    "tasks": [SCAN, {"id": "summary", "type": "summary", "inputs": {"scan": "scan"}}],
}


def crate_outputs(archive: Path) -> dict[str, bytes]:
    """The task outputs a crate holds, by path below the run (as `outputs` gives a run's)."""
    with zipfile.ZipFile(archive) as zipped:
        return {
            name.removeprefix("tasks/"): zipped.read(name)
            for name in zipped.namelist()
            if name.startswith("tasks/") and "/out/" in name
        }


def run_again(archive: Path, by: Identity | None = None) -> Run:
    backend.cache_clear()
    run, _ = submit_crate(
        identity=by or factories.person(),
        archive=archive,
        nodes=backend().nodes(),
        limits=LIMITS,
    )
    return run


def test_a_real_runs_crate_is_valid_and_made_again_writes_the_same_bytes(
    services: Services, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """`simrun crate validate` (roc-validator at the REQUIRED level, offline) on the crate of
    a scan and its summary run by real pods; the run made again from that crate computes
    every unit again and writes the same bytes. One run serves both: a scan costs seconds."""
    original = succeeded(SCAN_AND_SUMMARY)
    crate = export_to(run_id=original.pk, target=tmp_path / "scan.crate.zip")

    result = simrun("crate", "validate", str(crate))

    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for profile in (
        "ro-crate-1.1",
        "process-run-crate-0.5",
        "workflow-run-crate-0.5",
        "provenance-run-crate-0.5",
        "workflow-ro-crate-1.0",
    ):
        assert f"{profile}: valid at the REQUIRED level (0 issues)" in lines
    assert lines[-1] == "valid"

    again = wait_for_end(run_again(crate).pk)

    assert again.state == "succeeded", again.message
    assert run_reuse(again).reused == 0  # every unit computed again, none reused
    assert computed(again, "scan") == again.tasks.get(task_id="scan").units_total == 6
    assert outputs(again) == outputs(original) == crate_outputs(crate)
    assert Run.objects.get(pk=again.pk).from_crate.startswith(f"simrun-run:{original.pk} ")
    from tests.api.live import serving

    with serving() as url:
        monkeypatch.setenv("SIMRUN_URL", url)
        monkeypatch.setenv("SIMRUN_TOKEN", factories.token(factories.owner()).secret)
        assert main(["compare", original.pk, again.pk]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[-1] == f"outputs: identical ({len(outputs(original))} files, byte for byte)"


OUT = 'mkdir -p "$SIMRUN_TASK_DIR/out" && cd "$SIMRUN_TASK_DIR/out" && '
SORT = OUT + 'sort "$SIMRUN_SNAPSHOTS_DIR"/*/data.txt > sorted.txt'
COUNT = OUT + 'wc -l < "$SIMRUN_RUN_DIR/$SIMRUN_INPUT_SORTED/sorted.txt" > count.txt'
COMMANDS = {
    "name": "sorting",
    "tasks": [
        {"id": "sort", "type": "command", "settings": {"args": ["sh", "-c", SORT]}},
        {
            "id": "count",
            "type": "command",
            "inputs": {"sorted": "sort"},
            "settings": {"args": ["sh", "-c", COUNT]},
        },
    ],
}


def moved_to_another_installation(services: Services, settings: Settings, tmp_path: Path) -> None:
    """Another installation on this machine: a new store and data directory, no run and no
    snapshot row (the identities stay), its own worker and watcher."""
    services.stop_all()
    _kill_pods(Path(settings.SIMRUN_STORE))
    Run.objects.all().delete()
    Snapshot.objects.all().delete()
    other = tmp_path / "another"
    (other / "store").mkdir(parents=True)
    settings.SIMRUN_STORE = other / "store"
    services.env.update(SIMRUN_STORE=str(other / "store"), SIMRUN_DATA_DIR=str(other / "data"))
    services.start("worker")
    services.start("watcher")


def test_a_command_run_made_again_in_another_installation_writes_the_same_bytes(
    services: Services, tmp_path: Path, settings: Settings
) -> None:
    """No run id, path or row of the first installation is needed: the crate's snapshot is
    made again (the commands read it), its workflow and settings run again."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "data.txt").write_text("pear\napple\nquince\nfig\n")
    info = snapshot_directory(store(), model)
    Snapshot.objects.create(digest=info.digest, name="model", files=info.files, bytes=info.bytes)
    backend.cache_clear()
    made, _ = create_run(
        identity=factories.person(),
        workflow=COMMANDS,
        sources=[info.digest],
        nodes=backend().nodes(),
    )
    first = wait_for_end(made.pk)
    assert first.state == "succeeded", first.message
    crate = export_to(run_id=first.pk, target=tmp_path / "sorting.crate.zip")
    shutil.rmtree(model)
    moved_to_another_installation(services, settings, tmp_path)

    again = wait_for_end(run_again(crate).pk)

    assert again.state == "succeeded", again.message
    assert outputs(again) == crate_outputs(crate)
    assert outputs(again)["sort/out/sorted.txt"] == b"apple\nfig\npear\nquince\n"
    assert again.sources == [info.digest]
    assert (store().snapshot(info.digest) / "data.txt").is_file()


def test_a_resumed_runs_crate_says_which_units_came_from_which_run(
    services: Services, tmp_path: Path
) -> None:
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
    resumed = succeeded(workflow, resume_from=cancelled.pk)
    reused = Run.objects.get(pk=resumed.pk).tasks.get(task_id="nap").reused[cancelled.pk]
    names = [f"u{i:06d}" for start, end in reused for i in range(start, end)]
    assert run_reuse(resumed).reused == len(names) >= 6  # what the service recorded

    archive = export_to(run_id=resumed.pk, target=tmp_path / "resumed.crate.zip")

    with zipfile.ZipFile(archive) as zipped:
        graph = {e["@id"]: e for e in json.load(io.BytesIO(zipped.read(METADATA_FILE)))["@graph"]}
    derived = graph["tasks/nap/out/"]["wasDerivedFrom"]
    assert len(derived) == 1
    origin = graph[derived[0]["@id"]]
    assert origin["identifier"] == cancelled.pk
    assert origin["name"] == f"{len(names)} units of nap computed by run {cancelled.pk}"
    listed = origin["description"].removeprefix("reused, not computed again: ").split(", ")
    assert [
        n for part in listed for n in _unit_names(part)
    ] == names  # every reused unit, by its name
    assert f"{len(names)} reused from {cancelled.pk}" in graph["#task/nap"]["description"]


def _unit_names(part: str) -> list[str]:
    """`u000003 to u000005` -> u000003, u000004, u000005; `u000007` -> u000007."""
    first, _, last = part.partition(" to ")
    end = int((last or first)[1:]) + 1
    return [f"u{i:06d}" for i in range(int(first[1:]), end)]


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "crates" / "repressilator-ode-scan"


def test_the_example_crate_of_the_repository_runs_again_to_its_bytes(
    services: Services, tmp_path: Path
) -> None:
    archive = tmp_path / "example.crate.zip"
    with archive.open("wb") as out:
        zip_crate(EXAMPLE, out)

    run = wait_for_end(run_again(archive).pk)

    assert run.state == "succeeded", run.message
    expected = {
        str(path.relative_to(EXAMPLE / "tasks")): path.read_bytes()
        for path in sorted((EXAMPLE / "tasks").glob("*/out/*"))
    }
    assert outputs(run) == expected
    assert set(expected) == {
        "scan/out/grid.json",
        "scan/out/scan.nc",
        "summary/out/summary.csv",
        "summary/out/summary.json",
    }

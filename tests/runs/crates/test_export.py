"""A run exported as a Workflow Run RO-Crate: valid for every profile it declares, offline,
readable by `rocrate`, holding every byte it describes, and nothing a link points at."""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import zipfile
from pathlib import Path
from typing import Any

import pytest
from rocrate.rocrate import ROCrate

from runs.cli.service_state import write_token
from runs.crates.profiles import DECLARED
from runs.crates.validation import METADATA_FILE, fill_cache, validate_crate
from runs.crates.writing import write_crate, zip_chunks
from runs.kept_environment import keep
from runs.models import Run
from runs.selectors.crates import RunNotExportable, run_record
from runs.services.crates import export_to
from runs.store import task_paths
from tests import factories
from tests.runs.crates.scenes import finished_scan

pytestmark = pytest.mark.django_db


def graph(crate: Path) -> dict[str, dict[str, Any]]:
    data = json.loads((crate / METADATA_FILE).read_text())
    return {entity["@id"]: entity for entity in data["@graph"]}


def exported(run: Run, target: Path, *, metadata_only: bool = False) -> Path:
    write_crate(run_record(run), target, Path(run_store()), metadata_only=metadata_only)
    return target


def run_store() -> str:
    from django.conf import settings

    return str(settings.SIMRUN_STORE)


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "crates" / "repressilator-ode-scan"


def assert_valid_for_every_declared_profile(crate: Path) -> None:
    """roc-validator at the REQUIRED level, offline: every profile the crate declares is
    checked, with no issue and no check skipped."""
    verdict = validate_crate(crate)

    assert verdict.valid, "\n".join(verdict.lines())
    assert {p.uri for p in DECLARED} <= {p.uri for p in verdict.profiles}
    assert all(not p.issues and not p.skipped for p in verdict.profiles)


@pytest.mark.slow
def test_the_example_crate_of_the_repository_is_valid_for_every_profile_it_declares() -> None:
    """A real run's export (examples/crates/README.md): no sources, simrun's environment."""
    assert_valid_for_every_declared_profile(EXAMPLE)


@pytest.mark.slow
def test_a_run_with_a_model_and_its_environment_is_valid_for_every_profile_it_declares(
    store: Path, tmp_path: Path
) -> None:
    """As the demo's run of examples/workflows/repressilator.yaml: a model snapshot with its
    manifest, and the model's project and constraints in `environment/`."""
    crate = exported(finished_scan(), tmp_path / "crate")

    assert sorted(p.name for p in (crate / "environment").iterdir()) == [
        "constraints.txt",
        "pyproject.toml",
    ]
    (snapshot,) = (crate / "snapshots").iterdir()
    assert {".simrun-manifest.json", "repressilator.ant"} <= {p.name for p in snapshot.iterdir()}
    assert_valid_for_every_declared_profile(crate)


def test_the_crate_reads_with_rocrate_as_the_run_it_records(store: Path, tmp_path: Path) -> None:
    run = finished_scan()
    crate = ROCrate(exported(run, tmp_path / "crate"))

    workflow = crate.mainEntity
    assert workflow.id == "workflow.json"
    assert {"ComputationalWorkflow", "HowTo"} <= set(workflow.type)
    assert json.loads((tmp_path / "crate" / "workflow.json").read_text()) == run.workflow
    steps = [crate.get(s.id) for s in workflow["step"]]
    assert [s["name"] for s in steps] == ["scan", "summary"]
    action = crate.get("#run")
    assert action.type == "CreateAction" and action["instrument"].id == "workflow.json"
    assert action["agent"]["name"] == factories.PERSON
    assert action["endTime"] == run.ended_at.isoformat()
    assert action["actionStatus"] == "http://schema.org/CompletedActionStatus"  # not an entity
    scan = crate.get("#task/scan")
    tool = scan["instrument"]
    assert (tool["name"], tool["softwareVersion"]) == ("ode_scan", "0.1.0")
    assert len(tool["identifier"]) == 64  # the digest of the plugin's files
    settings = {pv["name"]: pv["value"] for pv in scan["object"] if pv.type == "PropertyValue"}
    assert settings["t_end"] == "20" and json.loads(settings["parameters"])["n"] == [1.5, 2.0]


def test_every_file_holds_the_bytes_its_digest_and_size_say(store: Path, tmp_path: Path) -> None:
    crate = exported(finished_scan(), tmp_path / "crate")

    files = {k: e for k, e in graph(crate).items() if "sha256" in e}
    assert {"workflow.json", "tasks/scan/out/scan.json", "tasks/scan/logs/scan-w0-0.log"} <= set(
        files
    )
    assert any(k.startswith("snapshots/") and k.endswith("repressilator.ant") for k in files)
    assert any(k.startswith("environment/") for k in files)
    for path, entity in files.items():
        data = (crate / path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entity["sha256"], path
        assert int(entity["contentSize"]) == len(data), path
    on_disk = {str(p.relative_to(crate)) for p in crate.rglob("*") if p.is_file()} - {METADATA_FILE}
    assert on_disk == set(files)
    assert not (crate / "tasks" / "scan" / "out" / ".simrun-merged").exists()


@pytest.mark.parametrize("model", [True, False], ids=["with a model", "without sources"])
def test_every_data_entity_is_in_the_crate(store: Path, tmp_path: Path, model: bool) -> None:
    """A data entity (a path, not a `#` entity) that the crate does not hold makes it invalid
    for RO-Crate 1.1: a run without sources has no environment folder to point at."""
    crate = exported(finished_scan(model=model), tmp_path / "crate")

    for entity_id, entity in graph(crate).items():
        types = {entity["@type"]} if isinstance(entity["@type"], str) else set(entity["@type"])
        if types & {"File", "Dataset"} and not entity_id.startswith(("#", "http")):
            assert (crate / entity_id).exists(), entity_id


def test_metadata_only_describes_each_file_by_digest_and_size_without_its_bytes(
    store: Path, tmp_path: Path
) -> None:
    """The store's files (snapshots, outputs, logs) are not held: each is a local identifier
    with the path it would have; the workflow and the environment's files are held."""
    run = finished_scan()
    crate = exported(run, tmp_path / "crate", metadata_only=True)

    held = {str(p.relative_to(crate)) for p in crate.rglob("*") if p.is_file()}
    environment = {p for p in held if p.startswith("environment/")}
    assert held - environment == {METADATA_FILE, "workflow.json"}
    assert "environment/pyproject.toml" in environment
    entities = graph(crate)
    assert "tasks/scan/out/scan.json" not in entities
    entity = entities["#tasks/scan/out/scan.json"]
    data = (task_paths(run.pk, "scan").out / "scan.json").read_bytes()
    assert entity["sha256"] == hashlib.sha256(data).hexdigest()
    assert entity["contentSize"] == str(len(data))
    assert entity["localPath"] == "tasks/scan/out/scan.json"
    assert entity["@type"] == "File"
    out = entities["#tasks/scan/out/"]
    assert {"@id": "#tasks/scan/out/scan.json"} in out["hasPart"]
    assert {"@id": "#tasks/scan/out/"} in entities["#run"]["result"]
    assert any(e.startswith("#snapshots/") and e.endswith("repressilator.ant") for e in entities)


@pytest.mark.slow
def test_a_metadata_only_crate_is_valid_for_every_profile_it_declares(
    store: Path, tmp_path: Path
) -> None:
    crate = exported(finished_scan(), tmp_path / "crate", metadata_only=True)

    assert_valid_for_every_declared_profile(crate)


def test_a_link_a_task_made_is_exported_without_what_it_points_at(
    store: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the service's secret")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "inside.txt").write_text("the service's other secret")
    run = finished_scan()
    out = task_paths(run.pk, "summary").out
    os.symlink(secret, out / "stolen.txt")
    os.symlink(elsewhere, out / "stolen-dir")
    os.symlink(secret, task_paths(run.pk, "summary").logs / "summary-w0-1.log")

    chunks = b"".join(zip_chunks(run_record(run), store))

    with zipfile.ZipFile(io.BytesIO(chunks)) as zipped:
        names = zipped.namelist()
        text = b"".join(zipped.read(n) for n in names)
    assert "tasks/summary/out/summary.json" in names
    assert not any("stolen" in n or n.endswith("summary-w0-1.log") for n in names)
    assert b"secret" not in text


def test_a_file_replaced_by_a_link_after_listing_is_left_out(store: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the service's secret")
    run = finished_scan()
    record = run_record(run)
    out = task_paths(run.pk, "scan").out / "scan.json"
    out.unlink()
    os.symlink(secret, out)  # between the listing and the read

    crate = tmp_path / "crate"
    write_crate(record, crate, store)

    assert not (crate / "tasks/scan/out/scan.json").exists()
    assert "tasks/scan/out/scan.json" not in graph(crate)
    assert "secret" not in (crate / METADATA_FILE).read_text()


def test_the_crate_records_the_constraints_the_run_was_resolved_under(
    store: Path, tmp_path: Path
) -> None:
    """Not the pins this installation would use on the day of the export."""
    run = finished_scan()
    project = (store / "snapshots" / run.sources[0] / "pyproject.toml").read_bytes()
    keep(run.pk, {"pyproject.toml": project, "constraints.txt": b"pydantic==2.0.0\n"})

    crate = exported(run, tmp_path / "crate")

    assert (crate / "environment" / "constraints.txt").read_bytes() == b"pydantic==2.0.0\n"


def test_a_live_run_is_not_exported(store: Path) -> None:
    run = finished_scan(state="running")

    with pytest.raises(RunNotExportable, match="is running: a crate records an ended run"):
        run_record(run)


def test_a_resumed_run_records_which_units_came_from_which_run(store: Path, tmp_path: Path) -> None:
    run = finished_scan()
    reused = {"0earlier0run": [[0, 1]], "1other1run": [[3, 6], [7, 8]]}
    run.tasks.filter(task_id="scan").update(units_total=9, reused=reused)

    entities = graph(exported(run, tmp_path / "crate"))

    derived = [entities[d["@id"]] for d in entities["tasks/scan/out/"]["wasDerivedFrom"]]
    assert [(d["identifier"], d["description"]) for d in derived] == [
        ("0earlier0run", "reused, not computed again: u000000"),
        ("1other1run", "reused, not computed again: u000003 to u000005, u000007"),
    ]
    assert derived[1]["name"] == "4 units of scan computed by run 1other1run"
    assert "5 reused from 0earlier0run, 1other1run" in entities["#task/scan"]["description"]
    assert "wasDerivedFrom" not in entities["tasks/summary/out/"]


def test_a_reused_output_of_an_unsplit_task_is_named_as_such(store: Path, tmp_path: Path) -> None:
    run = finished_scan()
    run.tasks.filter(task_id="summary").update(reused={"0earlier0run": ["out"]})

    entities = graph(exported(run, tmp_path / "crate"))

    derived = entities["tasks/summary/out/"]["wasDerivedFrom"]
    assert entities[derived[0]["@id"]]["description"] == "reused, not computed again: its output"


def test_a_failed_run_records_its_state_and_message(store: Path, tmp_path: Path) -> None:
    run = finished_scan(state="failed")

    action = graph(exported(run, tmp_path / "crate"))["#run"]

    assert action["actionStatus"] == {"@id": "http://schema.org/FailedActionStatus"}
    assert action["error"] == "task 'summary' failed: exit 3"


def test_an_agents_run_names_the_agent_and_the_person_it_acts_for(
    store: Path, tmp_path: Path
) -> None:
    factories.token(factories.agent())
    run = finished_scan(by=factories.agent())

    crate = exported(run, tmp_path / "crate")
    entities = graph(crate)

    agent = entities[entities["#run"]["agent"]["@id"]]
    assert agent["name"] == factories.AGENT
    assert entities[agent["maintainer"]["@id"]]["name"] == factories.PERSON
    assert entities["#run"]["participant"] == agent["maintainer"]
    assert "srn_" not in (crate / METADATA_FILE).read_text()  # no token


def test_each_export_is_counted_on_the_run(store: Path, tmp_path: Path) -> None:
    run = finished_scan()

    export_to(run_id=run.pk, target=tmp_path / "one.zip")
    export_to(run_id=run.pk, target=tmp_path / "two")

    assert Run.objects.get(pk=run.pk).exports == 2
    with zipfile.ZipFile(tmp_path / "one.zip") as zipped:
        assert METADATA_FILE in zipped.namelist()


def test_the_validator_offline_finds_the_context_only_in_the_cache_filled_from_rocrate(
    store: Path, tmp_path: Path
) -> None:
    """Without the packaged context in its cache the offline validator cannot read a crate:
    what makes it work is the filling, not a network."""
    from rocrate_validator import services
    from rocrate_validator.models import Severity, ValidationSettings

    crate = exported(finished_scan(), tmp_path / "crate")

    def valid_with(cache: Path) -> bool:
        settings = ValidationSettings(
            rocrate_uri=str(crate),
            profile_identifier="ro-crate-1.1",
            requirement_severity=Severity.REQUIRED,
            offline=True,
            cache_path=cache,
        )
        try:
            return bool(services.validate(settings).passed())
        except Exception:
            return False

    assert not valid_with(tmp_path / "empty-cache")
    fill_cache(tmp_path / "filled-cache")
    assert valid_with(tmp_path / "filled-cache")


def test_no_secret_of_the_service_is_in_any_byte_of_a_crate(
    store: Path, tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service's SECRET_KEY, its DATABASE_URL and that URL's password, and the machine
    token `simrun serve` keeps in the data directory (`cli_token`) are in no file of the crate
    of an ordinary run, its metadata included, in the zip as served or a crate directory."""
    settings.SECRET_KEY = "the-secret-key-" + secrets.token_urlsafe(40)
    password = "the-database-password-" + secrets.token_urlsafe(16)
    database_url = f"postgres://simrun:{password}@db.example.internal:5432/simrun"
    monkeypatch.setenv("DATABASE_URL", database_url)
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()
    machine_token = factories.token(factories.owner()).secret
    write_token(settings.DATA_DIR, machine_token)
    secrets_of_the_service = {
        settings.SECRET_KEY,
        database_url,
        password,
        machine_token,
        *filter(None, [settings.DATABASES["default"].get("PASSWORD")]),
    }
    run = finished_scan()

    archive = export_to(run_id=run.pk, target=tmp_path / "crate.zip")
    directory = export_to(run_id=run.pk, target=tmp_path / "crate")

    with zipfile.ZipFile(archive) as zipped:
        held = {f"zip:{name}": zipped.read(name) for name in zipped.namelist()}
    held |= {f"dir:{p}": p.read_bytes() for p in directory.rglob("*") if p.is_file()}
    assert f"zip:{METADATA_FILE}" in held and "zip:tasks/scan/out/scan.json" in held
    for secret in secrets_of_the_service:
        leaked = [name for name, data in held.items() if secret.encode() in data]
        assert not leaked, f"{secret[:12]}… in {leaked}"


@pytest.mark.parametrize(
    ("limit", "value", "cut"),
    [
        ("SIMRUN_EXPORT_MAX_ENTRIES", 8, "entries"),
        ("SIMRUN_EXPORT_MAX_DEPTH", 1, "depth"),
    ],
)
def test_a_run_of_more_files_than_the_export_lists_is_refused_saying_so(
    store: Path, tmp_path: Path, settings: Any, limit: str, value: int, cut: str
) -> None:
    """A crate holds every file of a run or none: a listing cut at its limit refuses the
    export, naming the folder, the limit and its setting; no crate is written. Under the
    limit the same run exports."""
    run = finished_scan()
    out = task_paths(run.pk, "scan").out
    for i in range(10):
        (out / "extra" / f"{i}").mkdir(parents=True)
        (out / "extra" / f"{i}" / "value.txt").write_text(f"{i}\n")
    setattr(settings, limit, value)

    with pytest.raises(RunNotExportable) as refused:
        export_to(run_id=run.pk, target=tmp_path / "exports" / "crate.zip")

    assert str(refused.value) == (
        f"runs/{run.pk}/tasks/scan/out: more files than a crate lists (the listing stopped at "
        f"its limit of {cut}, {limit}); a crate holds every file of a run or none"
    )
    assert not (tmp_path / "exports").exists()  # not even a part of one
    setattr(settings, limit, 1_000)

    with zipfile.ZipFile(
        export_to(run_id=run.pk, target=tmp_path / "exports" / "crate.zip")
    ) as zipped:
        assert "tasks/scan/out/extra/9/value.txt" in zipped.namelist()

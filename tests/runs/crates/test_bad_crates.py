"""Crates that cannot be run again: each is refused with a message naming what is wrong, and
leaves the installation as it was (no run, no snapshot row, no snapshot, no blob, no file)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from pytest_django import Settings

from runs.crates.reading import CrateRefused
from runs.crates.validation import METADATA_FILE, CrateUnreadable
from runs.models import Run
from runs.planner import PlanRefused
from runs.plans import Node
from runs.services.crate_runs import submit_crate
from runs.services.crates import export_to
from runs.services.uploads import UploadRefused
from tests import factories
from tests.plugins import on_path, write_plugin
from tests.runs.crates.crate_files import (
    LIMITS,
    Installation,
    crate_members,
    fresh_installation,
    rewrite_digest,
    written,
    zipped,
)
from tests.runs.crates.scenes import finished_scan

pytestmark = pytest.mark.django_db
NODES = [Node("here", 4, 16)]
Members = dict[str, bytes]


@pytest.fixture
def members(store: Path, tmp_path: Path, settings: Settings) -> Members:
    """The members of a finished scan's crate, in a fresh installation that holds nothing."""
    found = crate_members(finished_scan(), tmp_path)
    fresh_installation(settings, tmp_path)
    return found


def refused(data: bytes, tmp_path: Path, settings: Settings) -> str:
    """The message a crate is refused with; the installation is unchanged by it."""
    root = Path(settings.SIMRUN_STORE)
    before = Installation.now(root)
    with pytest.raises((CrateRefused, CrateUnreadable, UploadRefused)) as refusal:
        submit_crate(
            identity=factories.person(),
            archive=written(data, tmp_path / "bad.zip"),
            nodes=NODES,
            limits=LIMITS,
        )
    assert Installation.now(root) == before
    return str(refusal.value)


def model_file(members: Members) -> str:
    return next(n for n in members if n.startswith("snapshots/") and n.endswith(".ant"))


def test_a_file_that_is_no_zip(members: Members, tmp_path: Path, settings: Settings) -> None:
    message = refused(b"PK but not really a zip", tmp_path, settings)

    assert message == "not a zip archive (a crate is a zip or a directory)"


def test_a_zip_bomb(members: Members, tmp_path: Path, settings: Settings) -> None:
    bomb = zipped({**members, "tasks/scan/out/zeros.bin": bytes(8 * 1024**2)})
    assert len(bomb) < 8 * 1024**2 // 200  # compressed far better than anything real

    message = refused(bomb, tmp_path, settings)

    assert "member 'tasks/scan/out/zeros.bin': unpacks to 8388608 bytes" in message
    assert "refused as a decompression bomb" in message


def test_a_crate_without_a_run_profile(
    members: Members, tmp_path: Path, settings: Settings
) -> None:
    metadata = json.loads(members[METADATA_FILE])
    root = next(e for e in metadata["@graph"] if e["@id"] == "./")
    root["conformsTo"] = [{"@id": "https://w3id.org/workflowhub/workflow-ro-crate/1.0"}]
    members[METADATA_FILE] = json.dumps(metadata).encode()

    message = refused(zipped(members), tmp_path, settings)

    assert message.startswith(
        "the crate declares no Workflow Run Crate profile (it conforms to: "
        "https://w3id.org/workflowhub/workflow-ro-crate/1.0)"
    )
    assert "Process Run Crate (https://w3id.org/ro/wfrun/process/0.5)" in message


def test_a_file_whose_digest_is_not_the_metadatas(
    members: Members, tmp_path: Path, settings: Settings
) -> None:
    name = model_file(members)
    members[name] = members[name].replace(b"alpha", b"omega")

    message = refused(zipped(members), tmp_path, settings)

    assert message.startswith(f"file {name!r}: its SHA-256 is ")
    assert message.endswith("(changed after the crate was made)")


def test_a_file_whose_size_is_not_the_metadatas(
    members: Members, tmp_path: Path, settings: Settings
) -> None:
    metadata = json.loads(members[METADATA_FILE])
    entity = next(e for e in metadata["@graph"] if e["@id"] == "workflow.json")
    entity["contentSize"] = str(int(entity["contentSize"]) + 1)
    members[METADATA_FILE] = json.dumps(metadata).encode()

    message = refused(zipped(members), tmp_path, settings)

    assert message.startswith("file 'workflow.json': ")
    assert message.endswith("bytes (changed after the crate was made)")


def test_a_file_the_metadata_describes_that_is_missing(
    members: Members, tmp_path: Path, settings: Settings
) -> None:
    name = model_file(members)
    del members[name]

    message = refused(zipped(members), tmp_path, settings)

    assert message.startswith(f"file {name!r}: described by the metadata but not in the crate")


def test_a_metadata_only_crate_is_refused_naming_a_file_it_does_not_hold(
    store: Path, tmp_path: Path, settings: Settings
) -> None:
    run = finished_scan()
    archive = export_to(run_id=run.pk, target=tmp_path / "m.zip", metadata_only=True)
    fresh_installation(settings, tmp_path)

    message = refused(archive.read_bytes(), tmp_path, settings)

    assert message.startswith("file 'snapshots/")
    assert message.endswith(
        ": described by its digest, not held by the crate (a crate exported with "
        "--metadata-only holds no sources, outputs or logs and cannot be run again)"
    )


def test_a_crate_with_a_link_member(members: Members, tmp_path: Path, settings: Settings) -> None:
    message = refused(zipped(members, links={"secret": "workflow.json"}), tmp_path, settings)

    assert message == "member 'secret': a link; a crate holds files only"


def test_a_crate_without_metadata(members: Members, tmp_path: Path, settings: Settings) -> None:
    del members[METADATA_FILE]

    message = refused(zipped(members), tmp_path, settings)

    assert message == f"no {METADATA_FILE}: not an RO-Crate"


def test_a_task_type_not_installed_here_is_named_with_its_package(
    store: Path, tmp_path: Path, settings: Settings
) -> None:
    plugin = write_plugin(
        tmp_path / "plugins",
        package="simrun-lorenz",
        version="1.2",
        modules={"lorenz": "from simrun_examples.scan import OdeScan as Lorenz\n"},
        types={"lorenz_scan": "lorenz:Lorenz"},
    )
    run = finished_scan()
    workflow = copy.deepcopy(run.workflow)
    workflow["tasks"][0]["type"] = "lorenz_scan"
    Run.objects.filter(pk=run.pk).update(workflow=workflow)
    run.tasks.filter(task_id="scan").update(type="lorenz_scan")
    with on_path(plugin):
        members = crate_members(Run.objects.get(pk=run.pk), tmp_path)
    fresh_installation(settings, tmp_path)

    message = refused(zipped(members), tmp_path, settings)

    assert message == (
        "task 'scan': the task type 'lorenz_scan' is not installed here (the crate's run used "
        "it from the package simrun-lorenz 1.2); install simrun-lorenz where the service runs "
        "(`simrun plugin install DIR` for its directory) and name it in the model's "
        "pyproject.toml, then submit the crate again"
    )


def test_a_snapshot_whose_manifest_was_changed(
    members: Members, tmp_path: Path, settings: Settings
) -> None:
    """A consistent but different snapshot under the digest of the run's: not the run's."""
    name = model_file(members)
    folder = name.rsplit("/", 1)[0]
    manifest = json.loads(members[f"{folder}/.simrun-manifest.json"])
    manifest[0][2] = not manifest[0][2]  # an executable bit turned
    changed = json.dumps(manifest).encode()
    rewrite_digest(members, f"{folder}/.simrun-manifest.json", changed)

    message = refused(zipped(members), tmp_path, settings)

    assert message.startswith(f"snapshot {folder.removeprefix('snapshots/')}: its files make")


def test_a_workflow_the_service_refuses_leaves_no_snapshot(
    members: Members, tmp_path: Path, settings: Settings
) -> None:
    """Refused after the snapshots were stored (the plan finds no node): taken back."""
    root = Path(settings.SIMRUN_STORE)
    before = Installation.now(root)

    with pytest.raises(PlanRefused):
        submit_crate(
            identity=factories.person(),
            archive=written(zipped(members), tmp_path / "crate.zip"),
            nodes=[],
            limits=LIMITS,
        )

    assert Installation.now(root) == before

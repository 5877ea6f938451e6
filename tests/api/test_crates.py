"""`GET /api/runs/<id>/crate/`: the run as a Workflow Run RO-Crate, a zip sent while it is made."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from runs.crates.validation import METADATA_FILE
from runs.models import Run
from tests.api.conftest import Lab
from tests.runs.crates.scenes import finished_scan

pytestmark = pytest.mark.django_db


def body(response: object) -> bytes:
    return b"".join(response.streaming_content)  # type: ignore[attr-defined]


def test_an_ended_run_downloads_as_a_crate_zip_and_counts_the_export(lab: Lab) -> None:
    run = finished_scan(by=lab.person.identity)

    response = lab.other.client.get(f"/api/runs/{run.pk}/crate/")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert f'filename="simrun-{run.pk}.crate.zip"' in response["Content-Disposition"]
    with zipfile.ZipFile(io.BytesIO(body(response))) as zipped:
        names = set(zipped.namelist())
        metadata = json.loads(zipped.read(METADATA_FILE))
    assert {"workflow.json", "tasks/scan/out/scan.json", METADATA_FILE} <= names
    assert any(e["@id"] == "#run" for e in metadata["@graph"])
    assert Run.objects.get(pk=run.pk).exports == 1


def test_metadata_only_sends_the_metadata_and_the_workflow_without_the_stores_files(
    lab: Lab,
) -> None:
    run = finished_scan(by=lab.person.identity)

    response = lab.person.client.get(f"/api/runs/{run.pk}/crate/?metadata_only=true")

    with zipfile.ZipFile(io.BytesIO(body(response))) as zipped:
        names = zipped.namelist()
    assert {METADATA_FILE, "workflow.json"} <= set(names)
    assert not [n for n in names if n.startswith(("tasks/", "snapshots/"))]


def test_a_live_run_is_409_in_json_and_not_counted(lab: Lab) -> None:
    run = finished_scan(by=lab.person.identity, state="running")

    response = lab.person.client.get(f"/api/runs/{run.pk}/crate/")

    assert response.status_code == 409
    assert response.json()["code"] == "conflict"
    assert "export it once it ends" in response.json()["detail"]
    assert Run.objects.get(pk=run.pk).exports == 0


def test_an_unknown_run_is_404_in_json(lab: Lab) -> None:
    response = lab.person.client.get("/api/runs/nosuchrun/crate/")

    assert response.status_code == 404
    assert response.json()["code"] == "run_not_found"


def test_a_bad_metadata_only_flag_is_400_naming_it(lab: Lab) -> None:
    run = finished_scan(by=lab.person.identity)

    response = lab.person.client.get(f"/api/runs/{run.pk}/crate/?metadata_only=yes")

    assert response.status_code == 400
    assert response.json()["detail"] == "metadata_only: true or false"

"""`POST /api/runs/from_crate/`: a crate's zip as the body makes its run again, or is refused
(400 naming the file, 413 beyond the upload limit, 415 not a zip) and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_django import Settings

from runs.models import Run
from tests.api.conftest import Lab
from tests.runs.crates.crate_files import Installation, crate_members, fresh_installation, zipped
from tests.runs.crates.scenes import finished_scan

pytestmark = pytest.mark.django_db


@pytest.fixture
def crate(lab: Lab, store: Path, tmp_path: Path, settings: Settings) -> dict[str, bytes]:
    """A finished scan's crate, in a fresh installation where the lab's people remain."""
    members = crate_members(finished_scan(by=lab.person.identity), tmp_path)
    fresh_installation(settings, tmp_path)
    return members


def post(lab: Lab, body: bytes, query: str = "", content_type: str = "application/zip"):  # type: ignore[no-untyped-def]
    return lab.agent.client.post(
        f"/api/runs/from_crate/{query}", data=body, content_type=content_type
    )


def test_a_crate_becomes_a_run_submitted_by_the_token(lab: Lab, crate: dict[str, bytes]) -> None:
    response = post(lab, zipped(crate), "?group=replication")

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["state"], body["submitted_by"], body["group"]) == (
        "submitting",
        "ada",
        "replication",
    )
    assert body["from_crate"].startswith("simrun-run:")
    assert response["Location"] == f"/api/runs/{body['id']}/"
    assert Run.objects.get(pk=body["id"]).reuse is False


def test_a_changed_file_is_400_naming_it_and_changes_nothing(
    lab: Lab, crate: dict[str, bytes], settings: Settings
) -> None:
    crate["workflow.json"] = crate["workflow.json"].replace(b"20", b"21")
    before = Installation.now(Path(settings.SIMRUN_STORE))

    response = post(lab, zipped(crate))

    assert response.status_code == 400
    assert response.json()["code"] == "crate_refused"
    assert response.json()["detail"].startswith("file 'workflow.json': its SHA-256 is ")
    assert Installation.now(Path(settings.SIMRUN_STORE)) == before


def test_a_crate_larger_than_the_upload_limit_is_413_and_changes_nothing(
    lab: Lab, crate: dict[str, bytes], settings: Settings
) -> None:
    body = zipped(crate)
    settings.SIMRUN_MAX_UPLOAD_BYTES = len(body) - 1
    before = Installation.now(Path(settings.SIMRUN_STORE))

    response = post(lab, body)

    assert response.status_code == 413
    assert response.json()["detail"] == (
        f"the crate ({len(body)} bytes) is larger than the upload limit of {len(body) - 1} "
        "bytes (SIMRUN_MAX_UPLOAD_BYTES)"
    )
    assert Installation.now(Path(settings.SIMRUN_STORE)) == before


def test_a_body_that_is_no_zip_type_is_415(lab: Lab, crate: dict[str, bytes]) -> None:
    response = post(lab, zipped(crate), content_type="application/x-tar")

    assert response.status_code == 415
    assert response.json()["detail"] == "Content-Type: send the crate as application/zip"


def test_a_bad_reuse_flag_is_400_naming_it(lab: Lab, crate: dict[str, bytes]) -> None:
    response = post(lab, zipped(crate), "?reuse=yes")

    assert response.status_code == 400
    assert "reuse" in response.json()["detail"]

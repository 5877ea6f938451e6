"""Snapshot routes: upload (413 beyond the limit, nothing stored), register, list, show."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_django import Settings

from runs.models import Snapshot
from runs.snapshots import snapshot_directory
from simrun_harness.layout import StorePaths
from tests.api.archives import tar_files
from tests.api.conftest import Lab
from tests.api.test_uploads import files_below

pytestmark = pytest.mark.django_db

BODY = tar_files({"model/pyproject.toml": b"[project]\nname='m'\n", "model/m.py": b"x = 1\n"})
QUERY = "name=model&source_path=/home/paul/model&git_commit=abc123&git_dirty=true"


def post(lab: Lab, body: bytes, content_type: str = "application/x-tar", query: str = QUERY):  # type: ignore[no-untyped-def]
    return lab.agent.client.post(f"/api/snapshots/?{query}", data=body, content_type=content_type)


def test_an_upload_becomes_a_snapshot_with_its_provenance(lab: Lab, store: Path) -> None:
    """S15: the archive is stored as a snapshot; the record keeps where it came from."""
    response = post(lab, BODY)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["files"], body["source_path"], body["git_commit"], body["git_dirty"]) == (
        2,
        "/home/paul/model",
        "abc123",
        True,
    )
    assert body["created_by"] == "ada"
    assert (StorePaths(store).snapshot(body["digest"]) / "model/m.py").read_bytes() == b"x = 1\n"
    again = post(lab, BODY)
    assert (again.status_code, again.json()["digest"]) == (200, body["digest"])


def test_an_upload_one_byte_over_the_limit_is_413_and_stores_nothing(
    lab: Lab, store: Path, settings: Settings
) -> None:
    """S15: refused with 413 beyond the configured limit, before anything is stored."""
    settings.SIMRUN_MAX_UPLOAD_BYTES = len(BODY) - 1
    response = post(lab, BODY)
    assert response.status_code == 413
    assert response.json()["code"] == "too_large"
    assert files_below(store) == []
    assert Snapshot.objects.count() == 0
    settings.SIMRUN_MAX_UPLOAD_BYTES = len(BODY)
    assert post(lab, BODY).status_code == 201


def test_a_malicious_upload_is_400_with_its_reason_and_stores_nothing(
    lab: Lab, store: Path
) -> None:
    """S15: a path leaving the snapshot is refused with a clear error."""
    response = post(lab, tar_files({"../../etc/cron.d/x": b"* * * * * evil"}))
    assert response.status_code == 400
    assert response.json()["code"] == "upload_refused"
    assert "'..' would leave the snapshot" in response.json()["detail"]
    assert files_below(store) == []


def test_a_body_that_is_no_archive_type_is_415(lab: Lab) -> None:
    response = post(lab, b"hello", content_type="text/plain")
    assert response.status_code == 415
    assert "send one of" in response.json()["detail"]


def test_bad_provenance_is_400(lab: Lab) -> None:
    response = post(lab, BODY, query="git_dirty=perhaps")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("git_dirty:")


def test_a_snapshot_written_into_the_store_is_registered(
    lab: Lab, store: Path, tmp_path: Path
) -> None:
    """Clients that mount the store write snapshots themselves; the API records them."""
    source = tmp_path / "model"
    source.mkdir()
    (source / "m.py").write_text("x = 2\n")
    info = snapshot_directory(StorePaths(store), source)
    response = lab.person.client.post(
        "/api/snapshots/register/",
        {"digest": info.digest, "source_path": str(source)},
        format="json",
    )
    assert response.status_code == 201
    assert (response.json()["files"], response.json()["bytes"]) == (1, 6)
    missing = lab.person.client.post(
        "/api/snapshots/register/", {"digest": "f" * 64}, format="json"
    )
    assert missing.status_code == 404
    assert missing.json()["code"] == "snapshot_not_found"
    assert "is not in the run store" in missing.json()["detail"]


def test_snapshots_are_listed_and_shown(lab: Lab) -> None:
    digest = post(lab, BODY).json()["digest"]
    assert [s["digest"] for s in lab.other.client.get("/api/snapshots/").json()] == [digest]
    assert lab.other.client.get(f"/api/snapshots/{digest}/").json()["name"] == "model"
    assert lab.other.client.get("/api/snapshots/nope/").status_code == 404

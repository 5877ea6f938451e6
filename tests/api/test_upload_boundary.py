"""Uploads over real HTTP cannot rewrite anyone's snapshot, cannot answer 500, and are counted
in the bytes they would write: store-reserved names, members the file system cannot hold,
sparse tars and zips of many well-compressed members, archives of too many members."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pytest_django import Settings

from runs.models import Snapshot
from simrun_harness.layout import StorePaths
from tests.api.archives import many_members_tar, many_members_zip, sparse_tar, tar_files
from tests.api.conftest import Lab
from tests.api.live import serving
from tests.api.test_uploads import files_below

pytestmark = pytest.mark.django_db(transaction=True)

MIB = 1024 * 1024


@pytest.fixture
def base_url() -> Iterator[str]:
    with serving() as url:
        yield url


def upload(
    base_url: str, secret: str, body: bytes, media: str = "application/x-tar"
) -> httpx.Response:
    return httpx.post(
        f"{base_url}/api/snapshots/?name=model",
        content=body,
        headers={"Authorization": f"Bearer {secret}", "Content-Type": media},
        timeout=60,
    )


def refused(response: httpx.Response, *phrases: str) -> None:
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["code"] == "upload_refused", body
    for phrase in phrases:
        assert phrase in body["detail"], body["detail"]


def test_an_archive_naming_the_stores_manifest_is_refused_and_rewrites_no_snapshot(
    lab: Lab, base_url: str, store: Path
) -> None:
    """A member named `.simrun-manifest.json` (content `hello`) wrote the manifest through its
    hard link into the shared blob of `hello`: another person's `model/model.txt` changed."""
    theirs = upload(base_url, lab.person.secret, tar_files({"model/model.txt": b"hello"}))
    assert theirs.status_code == 201, theirs.text
    their_file = StorePaths(store).snapshot(theirs.json()["digest"]) / "model/model.txt"

    response = upload(base_url, lab.agent.secret, tar_files({".simrun-manifest.json": b"hello"}))

    refused(response, "'.simrun-manifest.json'", "reserved")
    assert their_file.read_bytes() == b"hello"
    assert Snapshot.objects.count() == 1


@pytest.mark.parametrize(
    ("members", "named"),
    [
        ({"model/a": b"1", "model/a/b": b"2"}, "'model/a/b'"),
        ({"model/a/b": b"2", "model/a": b"1"}, "'model/a'"),
        ({"model/" + "x" * 256: b"1"}, "x" * 256),
    ],
    ids=["file then directory", "directory then file", "name over 255 bytes"],
)
def test_a_member_the_file_system_cannot_hold_is_400_naming_it(
    lab: Lab, base_url: str, store: Path, members: dict[str, bytes], named: str
) -> None:
    response = upload(base_url, lab.agent.secret, tar_files(members))

    refused(response, named)
    assert files_below(store) == []


def test_a_sparse_tar_is_counted_at_its_full_size(
    lab: Lab, base_url: str, store: Path, settings: Settings
) -> None:
    """A 10 KiB plain tar whose sparse member stands for 1 GiB wrote a 1 GiB blob."""
    body = sparse_tar(1024**3)
    assert len(body) < 11 * 1024

    response = upload(base_url, lab.agent.secret, body)

    refused(response, "model/sparse.bin")
    assert files_below(store) == []


def test_a_zip_of_many_members_each_at_the_ratio_floor_is_a_bomb(
    lab: Lab, base_url: str, store: Path
) -> None:
    """256 distinct 1 MiB members in a 291 KB zip wrote 256 MiB (the ratio was per member)."""
    body = many_members_zip(256, MIB)

    response = upload(base_url, lab.agent.secret, body, "application/zip")

    refused(response, "decompression bomb")
    assert files_below(store) == []


def test_an_archive_of_more_members_than_the_limit_is_refused_naming_the_limit(
    lab: Lab, base_url: str, store: Path, settings: Settings
) -> None:
    settings.SIMRUN_UPLOAD_MAX_FILES = 100
    for body, media in (
        (many_members_tar(101), "application/x-tar"),
        (many_members_zip(101, 16), "application/zip"),
    ):
        response = upload(base_url, lab.agent.secret, body, media)
        refused(response, "more than 100 files", "SIMRUN_UPLOAD_MAX_FILES")
    assert files_below(store) == []


def test_an_upload_larger_than_an_api_body_limit_is_stored(
    lab: Lab, base_url: str, store: Path
) -> None:
    """An upload is held to SIMRUN_MAX_UPLOAD_BYTES, not to the 2.5 MiB of a JSON body."""
    body = tar_files({"model/data.bin": os.urandom(3 * MIB)})

    response = upload(base_url, lab.agent.secret, body)

    assert response.status_code == 201, response.text
    assert response.json()["bytes"] == 3 * MIB

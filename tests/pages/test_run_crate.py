"""The run page's provenance line and its "Download as RO-Crate" link."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from django.test import Client

from runs.models import Run
from tests import factories
from tests.runs.crates.scenes import finished_scan

pytestmark = pytest.mark.django_db


def test_an_ended_run_links_to_its_crate_and_says_how_often_it_was_exported(
    paul: Client, store: Path
) -> None:
    run = finished_scan(by=factories.person())

    page = paul.get(f"/runs/{run.pk}/").content.decode()
    assert "exported 0 times" in page
    assert f'href="/runs/{run.pk}/crate/"' in page and "Download as RO-Crate" in page

    download = paul.get(f"/runs/{run.pk}/crate/")
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content))) as zipped:
        assert "ro-crate-metadata.json" in zipped.namelist()
    assert "exported 1 time;" not in page
    assert "exported 1 time" in paul.get(f"/runs/{run.pk}/").content.decode()


def test_a_live_run_offers_no_crate_and_its_download_is_409(paul: Client, store: Path) -> None:
    run = finished_scan(by=factories.person(), state="running")

    assert "Download as RO-Crate" not in paul.get(f"/runs/{run.pk}/").content.decode()
    response = paul.get(f"/runs/{run.pk}/crate/")
    assert response.status_code == 409
    assert b"export it once it ends" in response.content


def test_a_rerun_says_which_crate_it_reruns(paul: Client, store: Path) -> None:
    run = finished_scan(by=factories.person())
    Run.objects.filter(pk=run.pk).update(from_crate="simrun-run:0abc sha256:1234")

    page = paul.get(f"/runs/{run.pk}/").content.decode()

    assert "re-run of crate simrun-run:0abc sha256:1234" in page

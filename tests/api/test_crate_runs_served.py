"""S15: a crate sent to a served API (uvicorn, the web process's application) is an upload: a
body beyond SIMRUN_MAX_UPLOAD_BYTES is refused with 413 whether its length is announced or it
comes in chunks, and nothing of it is kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pytest_django import Settings

from runs.models import Run
from tests.api.conftest import Lab
from tests.api.live import serving
from tests.runs.crates.crate_files import Installation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def base_url() -> Iterator[str]:
    with serving() as url:
        yield url


def send(base_url: str, lab: Lab, body: bytes | Iterator[bytes]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {lab.person.secret}", "Content-Type": "application/zip"}
    return httpx.post(f"{base_url}/api/runs/from_crate/", content=body, headers=headers)


def test_an_announced_crate_beyond_the_limit_is_413_before_its_body_is_read(
    lab: Lab, base_url: str, store: Path, settings: Settings
) -> None:
    settings.SIMRUN_MAX_UPLOAD_BYTES = 1000
    before = Installation.now(store)

    response = send(base_url, lab, bytes(1001))

    assert response.status_code == 413
    assert response.json()["code"] == "too_large"
    assert Installation.now(store) == before


def test_a_chunked_crate_is_cut_once_it_passes_the_limit(
    lab: Lab, base_url: str, store: Path, settings: Settings
) -> None:
    settings.SIMRUN_MAX_UPLOAD_BYTES = 100_000
    before = Installation.now(store)

    def body() -> Iterator[bytes]:
        yield b"PK\x03\x04"  # a zip's first bytes, then more than the limit
        for _ in range(20):
            yield bytes(10_000)

    response = send(base_url, lab, body())

    assert response.status_code == 413
    assert response.json()["code"] == "too_large"
    assert Installation.now(store) == before
    assert Run.objects.count() == 0

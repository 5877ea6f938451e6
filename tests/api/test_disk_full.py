"""A full disk is named as one in the API: the run detail carries it, and a write refused for
want of space is a 507 naming the disk, not a 500 whose id is in a log on that very disk.

A disk counts as full below SIMRUN_DISK_MIN_FREE_MB free: these tests ask for more than any
disk has, so the real disk of the test's data directory is full by that measure.
(tests/e2e/test_full_disk.py fills a real small disk.)
"""

from __future__ import annotations

import json
import sys

import pytest
from django.test import RequestFactory
from pytest_django import Settings

from runs.api.django_errors import server_error_response
from tests.api import scenes
from tests.api.conftest import Lab

pytestmark = pytest.mark.django_db

MORE_THAN_ANY_DISK_MB = 1e12


def test_the_run_detail_names_a_full_disk(lab: Lab, settings: Settings) -> None:
    run = scenes.split_run(by=lab.person.identity)
    settings.SIMRUN_DISK_MIN_FREE_MB = MORE_THAN_ANY_DISK_MB

    detail = lab.person.client.get(f"/api/runs/{run.id}/").json()

    assert detail["disk"]["full"] is True
    assert detail["disk"]["path"] == str(settings.DATA_DIR)
    assert detail["disk"]["needed_bytes"] == int(MORE_THAN_ANY_DISK_MB * 1024 * 1024)
    assert 0 <= detail["disk"]["free_bytes"] < detail["disk"]["needed_bytes"]


def test_the_run_detail_has_no_disk_while_every_disk_has_room(lab: Lab, settings: Settings) -> None:
    run = scenes.split_run(by=lab.person.identity)
    settings.SIMRUN_DISK_MIN_FREE_MB = 0

    assert lab.person.client.get(f"/api/runs/{run.id}/").json()["disk"] is None


def test_a_write_refused_for_want_of_space_is_a_507_naming_the_disk(
    settings: Settings,
) -> None:
    """A real ENOSPC (a write to /dev/full) reaching the API's error handler."""
    settings.SIMRUN_DISK_MIN_FREE_MB = MORE_THAN_ANY_DISK_MB
    try:
        with open("/dev/full", "wb") as full:
            full.write(b"x")
    except OSError:
        info = sys.exc_info()
    request = RequestFactory().post("/api/runs/")

    response = server_error_response(request, info)  # type: ignore[arg-type]

    body = json.loads(response.content)
    assert response.status_code == 507
    assert body["code"] == "disk_full"
    assert body["detail"].startswith(f"the disk of {settings.DATA_DIR} is full: ")
    assert "nothing was changed: free space there and try again" in body["detail"]
    assert "id" not in body

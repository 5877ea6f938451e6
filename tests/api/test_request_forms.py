"""Requests the OpenAPI document calls valid are taken, those it calls invalid refused: empty
query filters are no filter, an unknown task is 404, JSON fields keep their JSON types."""

from __future__ import annotations

import pytest

from tests import factories
from tests.api import scenes
from tests.api.conftest import Lab

pytestmark = pytest.mark.django_db


def test_an_empty_task_lists_the_workers_of_every_task(lab: Lab) -> None:
    run = scenes.split_run(by=lab.person.identity, units=3)
    every = lab.person.client.get(f"/api/runs/{run.id}/workers/").json()
    assert lab.person.client.get(f"/api/runs/{run.id}/workers/?task=").json() == every


def test_the_logs_of_an_unknown_task_are_404(lab: Lab) -> None:
    run = scenes.split_run(by=lab.person.identity, units=3)
    response = lab.person.client.get(f"/api/runs/{run.id}/logs/?task=nope")
    assert response.status_code == 404
    assert response.json()["code"] == "task_not_found"


def test_empty_filters_of_the_run_list_are_no_filters(lab: Lab) -> None:
    made = factories.run(by=lab.person.identity, group="study")
    response = lab.person.client.get("/api/runs/?state=&group=&owner=&cursor=")
    assert [r["id"] for r in response.json()["runs"]] == [made.id]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"older_than_days": 1, "dry_run": 1}, "dry_run"),
        ({"older_than_days": 1, "group": 7}, "group"),
        ({"older_than_days": "1"}, "older_than_days"),
    ],
)
def test_a_json_field_of_another_type_is_refused(lab: Lab, body: dict, field: str) -> None:
    """`1` is no boolean, `7` no text, `"1"` no number: 400 naming the field."""
    response = lab.owner.client.post("/api/cleanup/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["fields"]


def test_a_body_that_is_no_json_object_is_refused(lab: Lab) -> None:
    response = lab.person.client.post("/api/validate/", b"null", content_type="application/json")
    assert response.status_code == 400
    assert "JSON object" in response.json()["detail"]

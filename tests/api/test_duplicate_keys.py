"""A JSON body with a key twice in one object is a 400 naming the key, as YAML refuses it:
JSON parsers disagree on which of the two counts, so the service takes neither."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.api.conftest import Lab
from tests.api.live import serving

pytestmark = pytest.mark.django_db(transaction=True)

WORKFLOW = '"name": "w", "tasks": [{"id": "a", "type": "sleep", "settings": {"units": 2}}]'


@pytest.fixture
def base_url() -> Iterator[str]:
    with serving() as url:
        yield url


def post(base_url: str, secret: str, body: str) -> httpx.Response:
    return httpx.post(
        f"{base_url}/api/validate/",
        content=body.encode(),
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
        timeout=30,
    )


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ('{"workflow": {' + WORKFLOW + '}, "workflow": "name: x\\ntasks: []\\n"}', "workflow"),
        ('{"workflow": {' + WORKFLOW + ', "name": "again"}}', "name"),
        ('{"workflow": {"name": "w", "tasks": [{"id": "a", "id": "b", "type": "sleep"}]}}', "id"),
    ],
    ids=["top level", "in the workflow", "in a task"],
)
def test_a_key_twice_in_a_json_body_is_400_naming_it(
    lab: Lab, base_url: str, body: str, key: str
) -> None:
    response = post(base_url, lab.agent.secret, body)

    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["code"] == "duplicate_key"
    assert f"{key!r}" in response.json()["detail"]
    assert "twice" in response.json()["detail"]


def test_a_workflow_text_in_json_with_a_key_twice_is_refused_naming_it(
    lab: Lab, base_url: str
) -> None:
    text = '{"name": "w", "name": "again", "tasks": []}'
    response = httpx.post(
        f"{base_url}/api/validate/",
        json={"workflow": text},
        headers={"Authorization": f"Bearer {lab.agent.secret}"},
        timeout=30,
    )

    assert response.status_code == 400, response.text
    assert "duplicate key 'name'" in response.json()["detail"]

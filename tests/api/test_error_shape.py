"""Every answer under /api/ is JSON in the API's error shape, also for what Django refuses before
DRF sees the request: a body over the memory limit (413), a bad request or host (400), a
server error (500 with an id that is in the log line), an unknown route (404), a body nested
beyond the limit (400), a chunked body the server cannot read (411)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from pytest_django import Settings
from rest_framework.test import APIClient

from tests.api.conftest import Lab

pytestmark = pytest.mark.django_db


def _client(lab: Lab) -> APIClient:
    """The person's client, answering server errors as a server would (not raising them)."""
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {lab.person.secret}")
    return client


def _error(response: object, status: int, code: str) -> dict[str, object]:
    assert response.status_code == status, response.content  # type: ignore[attr-defined]
    assert response["Content-Type"] == "application/json", response.content  # type: ignore[index]
    body = json.loads(response.content)  # type: ignore[attr-defined]
    assert body["code"] == code, body
    assert isinstance(body["detail"], str) and body["detail"]
    return body  # type: ignore[no-any-return]


def test_a_json_body_over_the_memory_limit_is_refused_with_413(
    lab: Lab, settings: Settings
) -> None:
    """A JSON body longer than DATA_UPLOAD_MAX_MEMORY_SIZE: 413 naming the limit, in JSON."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = json.dumps({"workflow": "x" * 2000})
    response = lab.person.client.post("/api/validate/", body, content_type="application/json")
    assert "1000 bytes" in str(_error(response, 413, "too_large")["detail"])


@pytest.mark.parametrize("depth", [65, 100_000])
def test_a_json_body_nested_beyond_the_limit_is_refused_with_400(lab: Lab, depth: int) -> None:
    """A body nested deeper than SIMRUN_API_MAX_JSON_DEPTH (64): 400 naming the limit; one
    deeper than Python could parse (100 000) the same, not a server error."""
    body = '{"workflow": ' + "[" * depth + "]" * depth + "}"
    response = lab.person.client.post("/api/validate/", body, content_type="application/json")
    detail = str(_error(response, 400, "too_deep")["detail"])
    assert "64 levels" in detail and "SIMRUN_API_MAX_JSON_DEPTH" in detail


def test_a_json_body_at_the_depth_limit_is_read(lab: Lab) -> None:
    """64 levels (the body's object counts as one) are within the limit."""
    body = '{"workflow": ' + "[" * 63 + "]" * 63 + "}"
    response = lab.person.client.post("/api/validate/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"  # the field's own check, not the depth's


def test_a_body_that_is_not_json_is_refused_with_400(lab: Lab) -> None:
    response = lab.person.client.post("/api/validate/", b"{nope", content_type="application/json")
    assert "JSON" in str(_error(response, 400, "parse_error")["detail"])


def test_a_body_of_another_media_type_is_refused_with_415(lab: Lab) -> None:
    """The API reads JSON bodies only (uploads aside): a form is 415, not read half-way."""
    response = lab.person.client.post("/api/cleanup/", {"older_than_days": "1"}, format="multipart")
    assert "application/json" in str(_error(response, 415, "unsupported_media_type")["detail"])


def test_too_many_query_fields_are_a_bad_request_in_json(lab: Lab) -> None:
    """A SuspiciousOperation raised by Django (here DATA_UPLOAD_MAX_NUMBER_FIELDS) is 400."""
    query = "&".join(f"f{i}=1" for i in range(1100))
    _error(lab.person.client.get(f"/api/runs/?{query}"), 400, "bad_request")


def test_a_host_not_allowed_is_a_bad_request_in_json(lab: Lab) -> None:
    """A Host header outside ALLOWED_HOSTS is refused before any view, still in JSON."""
    response = lab.person.client.get("/api/whoami/", HTTP_HOST="evil.example")
    assert "evil.example" in str(_error(response, 400, "bad_request")["detail"])


def test_a_host_not_allowed_is_still_an_html_page_outside_the_api(lab: Lab) -> None:
    response = APIClient().get("/login/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert not response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_an_unknown_api_path_is_a_404_in_json(lab: Lab, method: str) -> None:
    """Any method on a path of no route (a POST too: no CSRF page) answers 404 no_route."""
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {lab.person.secret}")
    response = getattr(client, method)("/api/no/such/route/")
    _error(response, 404, "no_route")


def test_a_server_error_is_a_500_with_an_id_in_the_log_line(
    lab: Lab, settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A fault in a view (the store is a file, not a folder): 500 in JSON with an id, and
    the log line with the traceback carries the same id."""
    broken = tmp_path / "not-a-folder"
    broken.write_text("")
    settings.SIMRUN_STORE = broken
    with caplog.at_level(logging.ERROR):
        response = _client(lab).get("/api/usage/")
    body = _error(response, 500, "server_error")
    error_id = str(body["id"])
    assert error_id in str(body["detail"])
    traced = [r for r in caplog.records if r.exc_info]
    assert len(traced) == 1, "the fault is logged once, its traceback with the id"
    assert error_id in traced[0].getMessage()
    assert "NotADirectoryError" not in str(body), "the answer does not leak the fault"


def test_a_chunked_body_without_a_length_is_refused_with_411_under_wsgi(lab: Lab) -> None:
    """A WSGI server that passes a chunked body without Content-Length leaves Django nothing
    to read; rather than take it for an empty body, the API answers 411. (The service's own
    ASGI application reads such bodies: tests/api/test_served_errors.py.)"""
    body = json.dumps({"workflow": "name: x\ntasks: []\n"}).encode()
    response = lab.person.client.generic(
        "POST",
        "/api/validate/",
        body,
        content_type="application/json",
        CONTENT_LENGTH="",
        HTTP_TRANSFER_ENCODING="chunked",
    )
    _error(response, 411, "length_required")

"""Hostile workflows through the API (validate, runs, estimate): 400 in the error shape with the
limit and the line, nothing created; generated documents never answer 500."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pytest_django import Settings

from runs.models import Run
from runs.workflow_text import parse_text
from tests.api.conftest import Lab
from tests.api.live import serving
from tests.hostile import HOSTILE, layered, render

pytestmark = pytest.mark.django_db

ROUTES = ["/api/validate/", "/api/runs/", "/api/estimate/"]
TEXT_CLASSES = sorted(set(HOSTILE) - {"not_utf8"})


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", TEXT_CLASSES)
def test_each_hostile_text_is_a_400_naming_its_limit_and_line(
    lab: Lab, route: str, name: str
) -> None:
    hostile = HOSTILE[name]
    body = {"workflow": hostile.text.decode()}
    response = lab.person.client.post(route, body, format="json")
    assert response.status_code == 400, response.content[:300]
    answer = response.json()
    assert answer["code"] == "workflow_refused"
    (error,) = answer["errors"]
    assert error["line"] == hostile.line and hostile.says in error["text"]
    assert hostile.says in answer["detail"]
    assert not Run.objects.exists()


@pytest.mark.parametrize("route", ROUTES)
def test_a_body_that_is_not_utf8_is_a_400_in_the_error_shape(lab: Lab, route: str) -> None:
    raw = b'{"workflow": "' + HOSTILE["not_utf8"].text.replace(b"\n", b"\\n") + b'"}'
    response = lab.person.client.generic("POST", route, raw, content_type="application/json")
    assert response.status_code == 400
    assert set(response.json()) >= {"detail", "code"}


OBJECTS: dict[str, Any] = {
    "SIMRUN_WORKFLOW_MAX_DEPTH": {"name": "d", "tasks": [{"id": "a", "type": "sleep"}]},
    "SIMRUN_WORKFLOW_MAX_NODES": {"name": "n", "tasks": [{"id": "a", "type": "sleep"}]},
    "SIMRUN_WORKFLOW_MAX_STRING": {"name": "x" * 70_000, "tasks": []},
    "NUL": {"name": "a\x00b", "tasks": []},
    "64 bits": {"name": "i", "tasks": [{"id": "a", "type": "sleep", "settings": {"units": 2**64}}]},
}
_deep: Any = 1
for _ in range(30):  # deeper than the test's workflow limit, within the body parser's 64
    _deep = [_deep]
OBJECTS["SIMRUN_WORKFLOW_MAX_DEPTH"]["tasks"][0]["settings"] = {"units": _deep}
OBJECTS["SIMRUN_WORKFLOW_MAX_NODES"]["tasks"][0]["settings"] = {"units": list(range(30_000))}


@pytest.mark.parametrize("says", sorted(OBJECTS))
def test_a_workflow_object_gets_the_same_limits(lab: Lab, says: str, settings: Settings) -> None:
    """A workflow sent as a JSON object, not text: the same limits, without lines."""
    # below the body parser's depth (SIMRUN_API_MAX_JSON_DEPTH), which answers first otherwise
    settings.SIMRUN_WORKFLOW_MAX_DEPTH = 20
    body = json.dumps({"workflow": OBJECTS[says]})
    for route in ROUTES:
        response = lab.person.client.generic("POST", route, body, content_type="application/json")
        assert response.status_code == 400, (route, response.content[:300])
        assert response.json()["code"] == "workflow_refused"
        assert says in response.json()["detail"]
    assert not Run.objects.exists()


@given(layered())
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_generated_documents_are_answered_200_or_400_never_500(lab: Lab, layers: Any) -> None:
    doc = render(layers)
    response = lab.agent.client.post("/api/validate/", {"workflow": doc.text}, format="json")
    assert response.status_code in (200, 400), response.content[:300]
    body = response.json()
    if response.status_code == 400:
        assert body["code"] == "workflow_refused" and body["errors"]
    else:
        assert body["valid"] is False  # no tasks of known types: invalid, but read


@given(st.text(st.sampled_from(list("[]{}:,-&*!|>'\"#\n ab01.eE+\\"))))
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_any_text_is_answered_200_or_400_never_500(lab: Lab, text: str) -> None:
    response = lab.agent.client.post("/api/validate/", {"workflow": text}, format="json")
    assert response.status_code in (200, 400), response.content[:300]
    assert response.json()


@pytest.mark.django_db(transaction=True)
def test_simrun_submit_over_the_api_prints_the_refusal_not_a_traceback(
    lab: Lab, tmp_path: Path
) -> None:
    """`simrun submit` with SIMRUN_URL: the service's 400 with each error at its line."""
    path = tmp_path / "bomb.yaml"
    path.write_bytes(HOSTILE["alias_bomb"].text)
    with serving() as url:
        env = {**os.environ, "SIMRUN_URL": url, "SIMRUN_TOKEN": lab.person.secret}
        result = subprocess.run(
            [str(Path(sys.executable).parent / "simrun"), "submit", str(path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("simrun: the workflow text is refused:\n")
    assert "\nline 9: more than 20000 values, aliases expanded" in result.stderr
    assert not Run.objects.exists()


def test_a_workflow_text_handed_over_as_a_subclass_of_str_is_read() -> None:
    """Parsers may hand text over as a subclass of str (DRF's form fields did), which libyaml
    refuses unless the reader converts it."""

    class FormText(str):
        pass

    data, _ = parse_text(FormText("name: w\ntasks:\n  - {id: a, type: sleep}\n"))
    assert data == {"name": "w", "tasks": [{"id": "a", "type": "sleep"}]}

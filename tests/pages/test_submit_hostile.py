"""Hostile workflows on the submit page: pasted or uploaded, each shows its limit and line in
the page (never a server error) and creates nothing."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils.html import escape

from runs.models import Run
from tests.hostile import HOSTILE

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
PASTED = sorted(set(HOSTILE) - {"not_utf8"})


@pytest.mark.parametrize("name", PASTED)
def test_a_pasted_hostile_text_shows_its_limit_at_its_line(paul: Client, name: str) -> None:
    hostile = HOSTILE[name]
    text = hostile.text.decode()
    response = paul.post("/submit/", {"workflow": text, "action": "check"}, **HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert f'data-line="{hostile.line}"><strong>line {hostile.line}</strong>: ' in html
    assert escape(hostile.says) in html


@pytest.mark.parametrize("name", ["not_utf8", "oversized", "nul"])
def test_an_uploaded_hostile_file_shows_why_it_is_refused(paul: Client, name: str) -> None:
    hostile = HOSTILE[name]
    upload = SimpleUploadedFile("w.yaml", hostile.text, content_type="text/yaml")
    response = paul.post("/submit/", {"file": upload, "action": "load"}, **HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert f"line {hostile.line}: " in html and escape(hostile.says) in html


def test_submitting_an_alias_bomb_shows_the_error_and_creates_nothing(paul: Client) -> None:
    text = HOSTILE["alias_bomb"].text.decode()
    response = paul.post("/submit/", {"workflow": text, "action": "submit"})
    assert response.status_code == 400
    assert "SIMRUN_WORKFLOW_MAX_NODES" in response.content.decode()
    assert not Run.objects.exists()

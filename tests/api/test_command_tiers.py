"""Who may submit a `command` task (it runs any program as the service's user on the local
backend): the tiers of SIMRUN_COMMAND_TIERS; others are refused and nothing is recorded."""

from __future__ import annotations

import pytest
from pytest_django import Settings

from runs.models import Run
from tests.api.conftest import Lab, Member

pytestmark = pytest.mark.django_db

COMMAND = {
    "name": "hello",
    "tasks": [{"id": "hello", "type": "command", "settings": {"args": ["echo", "hi"]}}],
}


def submit(member: Member) -> object:
    return member.client.post("/api/runs/", {"workflow": COMMAND}, format="json")


def test_every_tier_may_submit_a_command_by_default(lab: Lab) -> None:
    assert submit(lab.agent).status_code == 201  # type: ignore[attr-defined]


def test_a_tier_left_out_of_command_tiers_is_refused(lab: Lab, settings: Settings) -> None:
    """S2: an agent's command is refused when only people may run commands; a person's runs."""
    settings.SIMRUN_COMMAND_TIERS = ["owner", "person"]
    refused = submit(lab.agent)
    assert refused.status_code == 400  # type: ignore[attr-defined]
    body = refused.json()  # type: ignore[attr-defined]
    assert body["code"] == "submission_refused"
    assert "task 'hello'" in body["detail"] and "SIMRUN_COMMAND_TIERS" in body["detail"]
    assert "not by the agent tier" in body["detail"]
    assert not Run.objects.exists()
    assert submit(lab.person).status_code == 201  # type: ignore[attr-defined]


def test_none_keeps_commands_from_everyone(lab: Lab, settings: Settings) -> None:
    settings.SIMRUN_COMMAND_TIERS = []
    refused = submit(lab.owner)
    assert refused.status_code == 400  # type: ignore[attr-defined]
    assert "by nobody here" in refused.json()["detail"]  # type: ignore[attr-defined]

"""Before a run: validate a workflow, estimate it, the task types."""

from __future__ import annotations

import math

import pytest

from runs.models import ResourceObservation
from tests import factories
from tests.api.conftest import Lab

pytestmark = pytest.mark.django_db

SWEEP = {"name": "sweep", "tasks": [{"id": "scan", "type": "sleep", "settings": {"units": 12}}]}


def test_a_valid_workflow_validates_without_errors(lab: Lab) -> None:
    response = lab.agent.client.post("/api/validate/", {"workflow": SWEEP}, format="json")
    assert response.json() == {"valid": True, "errors": []}


def test_validation_lists_every_error_with_its_location(lab: Lab) -> None:
    """S4: an unknown setting is an error; an invalid one is one error per field."""
    text = (
        "name: w\n"
        "tasks:\n"
        "  - id: scan\n"
        "    type: sleep\n"
        "    settings:\n"
        "      units: -1\n"
        "      seconds: -2\n"
        "      colour: red\n"
    )
    body = lab.agent.client.post("/api/validate/", {"workflow": text}, format="json").json()
    assert body["valid"] is False
    assert sorted((e["loc"], e["line"]) for e in body["errors"]) == [
        ("settings.colour", 8),
        ("settings.seconds", 7),
        ("settings.units", 6),
    ]
    assert all(e["text"].startswith("task 'scan': settings.") for e in body["errors"])


def test_validating_nothing_is_400(lab: Lab) -> None:
    response = lab.agent.client.post("/api/validate/", {"workflow": "   "}, format="json")
    assert response.status_code == 400
    assert response.json()["detail"] == "workflow: the workflow text is empty"


def test_an_estimate_is_the_median_unit_time_times_the_rounds(lab: Lab) -> None:
    """S5: median unit time of past runs times the rounds of units over all processes."""
    for seconds in (1.0, 2.0, 9.0):
        ResourceObservation.objects.create(
            task_type="sleep",
            run=factories.run(by=lab.person.identity, state="succeeded"),
            task_id="scan",
            worker="scan-w0",
            units_done=4,
            unit_seconds_median=seconds,
        )
    [task] = lab.person.client.post("/api/estimate/", {"workflow": SWEEP}, format="json").json()
    processes = task["plan"]["pods"] * task["plan"]["shape"]["processes"]
    assert task["units"] == 12
    assert task["seconds"] == 2.0 * math.ceil(12 / processes)
    assert task["resources"]["cores_per_process"] == 1.0


def test_without_history_there_is_no_estimate(lab: Lab) -> None:
    """S5: none without history."""
    [task] = lab.person.client.post("/api/estimate/", {"workflow": SWEEP}, format="json").json()
    assert task["seconds"] is None
    assert task["plan"]["pods"] == 1


def test_an_estimate_of_an_invalid_workflow_is_400_with_its_errors(lab: Lab) -> None:
    workflow = {"name": "w", "tasks": [{"id": "scan", "type": "sleep", "settings": {"x": 1}}]}
    response = lab.person.client.post("/api/estimate/", {"workflow": workflow}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["loc"] == "settings.x"


def test_task_types_carry_the_json_schema_of_their_settings(lab: Lab) -> None:
    """S11: task types with the JSON Schema of their settings."""
    types = {t["name"]: t for t in lab.other.client.get("/api/task-types/").json()}
    assert {"command", "sleep"} <= set(types)
    assert types["sleep"]["splittable"] is True
    assert "units" in types["sleep"]["settings_schema"]["properties"]
    one = lab.other.client.get("/api/task-types/command/").json()
    assert one["settings_schema"]["required"] == ["args"]
    missing = lab.other.client.get("/api/task-types/nope/")
    assert missing.status_code == 404
    assert "known: " in missing.json()["detail"]


def test_explain_reuse_says_per_task_what_would_be_reused_and_why_not_more(lab: Lab) -> None:
    """Before running: the first part of the key that differs from the earlier run of the
    same workflow, by the same route the command line's --explain-reuse takes."""
    from runs.services.reuse import plan_reuse

    client = lab.person.client
    first = client.post("/api/runs/", {"workflow": SWEEP}, format="json").json()
    plan_reuse(run_id=first["id"], environment="service")
    changed = {
        "name": "sweep",
        "tasks": [{**SWEEP["tasks"][0], "settings": {"units": 12, "seconds": 1}}],
    }

    same = client.post("/api/explain-reuse/", {"workflow": SWEEP}, format="json").json()
    other = client.post("/api/explain-reuse/", {"workflow": changed}, format="json").json()

    assert same["text"] == "would reuse 0 of 12 units"
    [task] = same["tasks"]
    assert task["note"]["text"] == (
        f"reused 0 of 12: the key is run {first['id']}'s; 12 unit(s) were not done there "
        "(or their outputs are gone)"
    )
    [task] = other["tasks"]
    assert task["note"]["differs"] == {
        "part": "setting",
        "name": "seconds",
        "here": "1.0",
        "there": "0.1",
    }
    assert task["note"]["compared_with"] == first["id"]


def test_explain_reuse_refuses_an_invalid_workflow_like_a_submission(lab: Lab) -> None:
    bad = {"name": "sweep", "tasks": [{"id": "scan", "type": "sleep", "settings": {"units": 0}}]}
    response = lab.agent.client.post("/api/explain-reuse/", {"workflow": bad}, format="json")
    assert response.status_code == 400
    assert "settings.units" in response.json()["detail"]

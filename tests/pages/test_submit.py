"""Submit: validated as you type with errors at their lines, the estimate, then the run."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from runs.models import Run, Snapshot

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}

VALID = """name: naps
tasks:
  - id: nap
    type: sleep
    settings:
      units: 4
      seconds: 0.01
"""
INVALID = """name: naps
tasks:
  - id: nap
    type: sleep
    settings:
      units: 0
      colour: blue
"""


def test_the_check_partial_lists_every_error_with_its_line(paul: Client) -> None:
    """S4: an unknown setting is an error; an invalid one names task, location and message."""
    response = paul.post("/submit/", {"workflow": INVALID, "action": "check"}, **HX)
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert (
        "<strong>line 6</strong>: task &#x27;nap&#x27;: settings.units: "
        "Input should be greater than or equal to 1" in html
    )
    assert "<strong>line 7</strong>: task &#x27;nap&#x27;: settings.colour: unknown setting" in html
    assert "2 errors" in html


def test_a_syntax_error_names_its_line(paul: Client) -> None:
    html = paul.post("/submit/", {"workflow": "name: x\ntasks: [\n", "action": "check"}, **HX)
    assert "not valid YAML or JSON" in html.content.decode()
    assert 'data-line="3"' in html.content.decode()


def test_a_valid_workflow_shows_the_estimate_of_every_task(paul: Client) -> None:
    """S5: no estimate without history (a split task's plan is still shown)."""
    html = paul.post("/submit/", {"workflow": VALID, "action": "check"}, **HX).content.decode()
    assert "The workflow is valid." in html
    assert '<th scope="row">nap</th><td>sleep</td><td class="num">4</td>' in html
    assert "no history" in html


def test_an_empty_workflow_asks_for_one(paul: Client) -> None:
    html = paul.post("/submit/", {"workflow": "", "action": "check"}, **HX).content.decode()
    assert "Paste or upload a workflow" in html


def test_submitting_a_valid_workflow_creates_the_run_and_opens_it(paul: Client) -> None:
    response = paul.post("/submit/", {"workflow": VALID, "group": "naps-1", "action": "submit"})
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.id}/"
    assert (run.name, run.group, run.owner.name, run.state) == (
        "naps",
        "naps-1",
        "paul",
        "submitting",
    )
    assert list(run.tasks.values_list("task_id", "units_total")) == [("nap", 4)]


def test_submitting_an_invalid_workflow_creates_nothing_and_shows_the_errors(paul: Client) -> None:
    response = paul.post("/submit/", {"workflow": INVALID, "action": "submit"})
    assert response.status_code == 400
    assert b"settings.colour: unknown setting" in response.content
    assert not Run.objects.exists()


def test_an_uploaded_file_fills_the_editor(paul: Client) -> None:
    upload = SimpleUploadedFile("w.yaml", VALID.encode(), content_type="text/yaml")
    response = paul.post("/submit/", {"file": upload, "action": "load"}, **HX)
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="editor">')
    assert "type: sleep" in html


def test_a_file_that_is_not_text_is_refused(paul: Client) -> None:
    upload = SimpleUploadedFile("w.yaml", b"\xff\xfe\x00bad", content_type="text/yaml")
    response = paul.post("/submit/", {"file": upload, "action": "load"})
    assert b"not UTF-8 text" in response.content


def test_the_model_snapshot_is_chosen_from_existing_ones_newest_first(paul: Client) -> None:
    Snapshot.objects.create(digest="a" * 64, name="older")
    Snapshot.objects.create(digest="b" * 64, name="newer")
    html = paul.get("/submit/").content.decode()
    assert html.index("newer · bbbbbbbbbbbb") < html.index("older · aaaaaaaaaaaa")


def test_an_unknown_snapshot_is_refused(paul: Client) -> None:
    response = paul.post("/submit/", {"workflow": VALID, "model": "c" * 64, "action": "submit"})
    assert b"Select a valid choice" in response.content
    assert not Run.objects.exists()


def test_a_task_types_schema_becomes_a_labelled_form(paul: Client) -> None:
    """S11: a task type's settings JSON Schema drives the editor."""
    html = paul.get("/submit/types/sleep/", **HX).content.decode()
    assert '<label for="id_setting_units">Units</label>' in html
    assert 'name="setting_units"' in html and 'min="1"' in html
    assert '<label for="id_setting_seconds">Seconds</label>' in html


def test_the_form_appends_its_task_to_the_workflow_as_yaml(paul: Client) -> None:
    response = paul.post(
        "/submit/types/sleep/",
        {
            "task_id": "more",
            "setting_units": "3",
            "setting_seconds": "0.5",
            "setting_merge_seconds": "0",
            "workflow": VALID,
        },
        **HX,
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="editor">')
    assert (
        "- id: more\n  type: sleep\n  settings:\n"
        "    units: 3\n    merge_seconds: 0.0\n    seconds: 0.5\n" in html
    )


def test_an_invalid_type_form_shows_its_errors_in_the_types_panel(paul: Client) -> None:
    response = paul.post("/submit/types/sleep/", {"task_id": "Bad Id", "setting_units": "0"}, **HX)
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#type-form"
    assert b"lowercase letters" in response.content
    assert b"greater than or equal to 1" in response.content


def test_a_duplicate_task_id_is_refused_by_the_type_form(paul: Client) -> None:
    response = paul.post(
        "/submit/types/sleep/",
        {
            "task_id": "nap",
            "setting_units": "3",
            "setting_seconds": "1",
            "setting_merge_seconds": "0",
            "workflow": VALID,
        },
    )
    assert response.status_code == 400
    assert b"has a task &#x27;nap&#x27; already" in response.content


def test_an_unknown_task_type_is_not_found(paul: Client) -> None:
    assert paul.get("/submit/types/nope/").status_code == 404

"""Plugin errors over the API: 400 with a message naming the task and the plugin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runs.models import Run
from tests.api.conftest import Lab
from tests.plugins import errors_plugin, on_path


@pytest.fixture(autouse=True)
def plugin_root(tmp_path: Path) -> Iterator[Path]:
    root = errors_plugin(tmp_path / "site")
    with on_path(root):
        yield root


def test_a_units_error_at_submission_is_400_naming_the_task_and_the_plugin(lab: Lab) -> None:
    """S3, S4: a submission the plugin's units() refuses is one error naming the task and the
    plugin; nothing is recorded."""
    workflow = {
        "name": "w",
        "tasks": [{"id": "t", "type": "picky", "settings": {"parameter": "k9"}}],
    }
    response = lab.person.client.post("/api/runs/", {"workflow": workflow}, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["code"] == "workflow_invalid"
    assert body["errors"][0]["text"].startswith(
        "task 't': settings: units(): the model has no parameter 'k9' "
        "(raised by plugin picky-plugin 0.1 (picky_types:Picky)); this submission has no model "
        "snapshot: give the model's directory with `simrun submit --source DIR`"
    )
    assert not Run.objects.exists()


def test_the_types_list_leaves_out_a_plugin_that_fails_to_import(lab: Lab) -> None:
    response = lab.person.client.get("/api/task-types/")
    assert response.status_code == 200
    names = {t["name"] for t in response.json()}
    assert "picky" in names and "ode_scan" in names and "broken" not in names

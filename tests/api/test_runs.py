"""Runs: list with filters and keyset pages, one run, submit (idempotent), cancel, delete."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.utils import timezone

from runs.models import Run, Task
from runs.states import RunState
from runs.store import run_paths
from runs.tasks import delete_run
from tests import factories
from tests.api import scenes
from tests.api.conftest import Lab

pytestmark = pytest.mark.django_db

COMMAND = {
    "name": "hello",
    "tasks": [{"id": "hello", "type": "command", "settings": {"args": ["echo", "hi"]}}],
}


def ids(response: object) -> list[str]:
    return [r["id"] for r in response.json()["runs"]]  # type: ignore[attr-defined]


# --- list -----------------------------------------------------------------------------------


def test_runs_are_listed_newest_first_in_keyset_pages(lab: Lab) -> None:
    """S7: the list pages by cursor; every run appears once."""
    made = [factories.run(by=lab.person.identity).id for _ in range(5)]
    seen: list[str] = []
    url = "/api/runs/?limit=2"
    while url:
        body = lab.other.client.get(url).json()
        seen += [r["id"] for r in body["runs"]]
        url = f"/api/runs/?limit=2&cursor={body['next_cursor']}" if body["next_cursor"] else ""
    assert seen == list(reversed(made))


def test_runs_filter_by_state_group_and_owner(lab: Lab) -> None:
    """S7: filters state, group and owner (a person's runs include their agents')."""
    paul = factories.run(by=lab.person.identity, group="study")
    ada = factories.run(by=lab.agent.identity, state="succeeded", group="study")
    sam = factories.run(by=lab.other.identity, state="failed")
    client = lab.owner.client
    assert ids(client.get("/api/runs/?owner=paul")) == [ada.id, paul.id]
    assert ids(client.get("/api/runs/?owner=ada")) == [ada.id]
    assert ids(client.get("/api/runs/?group=study&state=ended")) == [ada.id]
    assert ids(client.get("/api/runs/?state=failed,running")) == [sam.id, paul.id]


@pytest.mark.parametrize(
    "query", ["limit=", "cursor=", "state=", "group=", "owner=", "limit=&cursor=&state="]
)
def test_an_empty_filter_is_the_same_as_none(lab: Lab, query: str) -> None:
    """S7: `?limit=` (a form's empty field) is no limit given, as the document says."""
    made = [factories.run(by=lab.person.identity).id for _ in range(2)]

    assert ids(lab.person.client.get(f"/api/runs/?{query}")) == list(reversed(made))


def test_an_active_run_shows_its_progress_and_an_ended_one_none(lab: Lab) -> None:
    """S7: the mean over tasks of units done, capped below 1; null once the run ended."""
    active = scenes.split_run(by=lab.person.identity, units=4)
    scenes.work(active, "scan-w0", done=2)
    ended = factories.run(by=lab.person.identity, state="succeeded")
    runs = {r["id"]: r for r in lab.agent.client.get("/api/runs/").json()["runs"]}
    assert runs[active.id]["progress"] == 0.5
    assert runs[ended.id]["progress"] is None
    assert runs[active.id]["owner"] == "paul"


def test_a_live_run_whose_units_are_all_done_shows_a_progress_below_one(lab: Lab) -> None:
    """S7: a running run whose ledger is complete (its merge still to come) is not at 1."""
    active = scenes.split_run(by=lab.person.identity, units=4)
    scenes.work(active, "scan-w0", done=4)
    runs = {r["id"]: r for r in lab.agent.client.get("/api/runs/").json()["runs"]}
    assert 0.5 < runs[active.id]["progress"] < 1


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("state=sleeping", "unknown state 'sleeping'"),
        ("cursor=zzz", "cursor"),
        ("limit=0", "limit"),
        ("limit=5&limit=7", "limit: given more than once: give it once"),
    ],
)
def test_a_bad_filter_is_400_with_its_message(lab: Lab, query: str, message: str) -> None:
    response = lab.person.client.get(f"/api/runs/?{query}")
    assert response.status_code == 400
    assert message in response.json()["detail"]


# --- one run --------------------------------------------------------------------------------


def test_everyone_of_the_lab_reads_every_run(lab: Lab) -> None:
    """S1: people and agents read every run of the lab; only changing it is restricted."""
    run = factories.run(by=lab.person.identity)
    for who, may_change in [("owner", True), ("person", True), ("agent", True), ("other", False)]:
        body = getattr(lab, who).client.get(f"/api/runs/{run.id}/").json()
        assert (body["id"], body["may_change"]) == (run.id, may_change)
        assert body["tasks"][0]["task_id"] == "hello"


def test_an_unknown_run_is_404_with_its_id(lab: Lab) -> None:
    response = lab.person.client.get("/api/runs/nosuchrun/")
    assert response.status_code == 404
    assert response.json() == {"detail": "no run 'nosuchrun'", "code": "run_not_found"}


def test_a_run_in_submission_counts_the_controller_late_only_after_an_idle_pass(
    lab: Lab, settings: object
) -> None:
    """A run still in submission is the worker's: the watcher, idle until the submission
    rings it, passes only every idle poll, so the run's detail gives following that much
    longer before it calls the controller stopped; a run it follows gets the usual limit."""
    settings.SIMRUN_POLL_S, settings.SIMRUN_IDLE_POLL_S = 2.0, 60.0  # type: ignore[attr-defined]
    submitting = factories.run(by=lab.person.identity, state=RunState.SUBMITTING)
    running = factories.run(by=lab.person.identity, state=RunState.RUNNING)
    late = {
        run.id: lab.person.client.get(f"/api/runs/{run.id}/").json()["controller_late_s"]
        for run in (submitting, running)
    }
    assert late == {submitting.id: 70.0, running.id: 10.0}


# --- submit ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("who", "tier"), [("owner", "owner"), ("agent", "agent")])
def test_a_submission_answers_at_once_with_the_run_submitting(
    lab: Lab, who: str, tier: str
) -> None:
    """S3, S2: the run is recorded submitting with the tier of the token, task files written."""
    response = getattr(lab, who).client.post(
        "/api/runs/", {"workflow": COMMAND, "group": "g1"}, format="json"
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["state"], body["tier"], body["group"]) == ("submitting", tier, "g1")
    assert response["Location"] == f"/api/runs/{body['id']}/"
    assert run_paths(body["id"]).task("hello").task_file.exists()


def test_a_submission_records_its_reuse_and_the_detail_says_how_much_was_reused(
    lab: Lab,
) -> None:
    earlier = factories.run(by=lab.person.identity, state="succeeded")
    body = {"workflow": COMMAND, "resume_from": earlier.id}
    response = lab.person.client.post("/api/runs/", body, format="json")
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert (run.reuse, run.resume_from) == (True, earlier.id)
    Task.objects.filter(run=run).update(reused={earlier.id: ["out"]})

    detail = lab.person.client.get(f"/api/runs/{run.id}/").json()["reuse"]

    assert detail == {
        "reused": 1,
        "units": 1,
        "sources": {earlier.id: 1},
        "enabled": True,
        "resume_from": earlier.id,
        "text": "reused 1 of 1 units",
    }
    off = lab.person.client.post("/api/runs/", {"workflow": COMMAND, "reuse": False}, format="json")
    assert Run.objects.get(pk=off.json()["id"]).reuse is False


def test_a_retried_submission_with_its_key_returns_the_same_run(lab: Lab) -> None:
    """S3: an Idempotency-Key makes a retried submission return the run of the first."""
    client = lab.person.client
    first = client.post(
        "/api/runs/", {"workflow": COMMAND}, format="json", HTTP_IDEMPOTENCY_KEY="k"
    )
    again = client.post(
        "/api/runs/", {"workflow": COMMAND}, format="json", HTTP_IDEMPOTENCY_KEY="k"
    )
    other = client.post(
        "/api/runs/", {"workflow": COMMAND}, format="json", HTTP_IDEMPOTENCY_KEY="j"
    )
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 201)
    assert first.json()["id"] == again.json()["id"] != other.json()["id"]
    assert Run.objects.count() == 2


def test_an_invalid_workflow_text_is_400_with_every_error_and_its_line(lab: Lab) -> None:
    """S4: every error at once, with its location and line; nothing is recorded."""
    text = (
        "name: bad\n"
        "tasks:\n"
        "  - id: scan\n"
        "    type: sleep\n"
        "    settings: {units: 0, colour: red}\n"
        "  - id: sum\n"
        "    type: nosuchtype\n"
    )
    response = lab.person.client.post("/api/runs/", {"workflow": text}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "workflow_invalid"
    found = {(e["task"], e["loc"], e["line"]) for e in body["errors"]}
    assert {("scan", "settings.colour", 5), ("scan", "settings.units", 5)} <= found
    assert ("sum", "type", 7) in found
    assert Run.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"workflow": COMMAND, "sources": ["f" * 64]}, 400, "unknown snapshot"),
        ({"workflow": COMMAND, "split": "lots"}, 400, "split is auto, none or a number"),
        ({"workflow": COMMAND, "reserve": "elsewhere"}, 400, "no node named 'elsewhere'"),
        ({"workflow": 42}, 400, "workflow: a workflow object or its YAML/JSON text"),
        ({}, 400, "workflow: This field is required."),
        ({"workflow": COMMAND, "resume_from": "nosuch"}, 400, "resume_from: no run 'nosuch'"),
        ({"workflow": COMMAND, "resume_from": "No/Run"}, 400, "resume_from: "),
        ({"workflow": COMMAND, "reuse": "no"}, 400, "reuse: Must be a valid boolean"),
        (
            {"workflow": COMMAND, "reuse": False, "resume_from": "x"},
            400,
            "resume_from: a resumed run reuses done units; it cannot be combined with no reuse",
        ),
    ],
)
def test_a_refused_submission_is_400_with_its_message(
    lab: Lab, body: dict[str, object], status: int, message: str
) -> None:
    response = lab.person.client.post("/api/runs/", body, format="json")
    assert response.status_code == status
    assert message in response.json()["detail"]
    assert Run.objects.count() == 0


def test_a_task_larger_than_every_server_is_refused_with_what_it_asks(lab: Lab) -> None:
    workflow = {
        "name": "huge",
        "tasks": [
            {
                "id": "hello",
                "type": "command",
                "settings": {"args": ["true"]},
                "resources": {"memory_base_gb": 64},
            }
        ],
    }
    response = lab.person.client.post("/api/runs/", {"workflow": workflow}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "plan_refused"


SCRATCH_HOG = {
    "name": "hog",
    "tasks": [
        {
            "id": "hello",
            "type": "command",
            "settings": {"args": ["true"]},
            "resources": {"scratch_gb": 100_000},
        }
    ],
}


def test_a_task_whose_scratch_fits_no_server_is_refused_and_nothing_is_created(
    lab: Lab, store: Path
) -> None:
    """Scratch is checked against the servers' disks at submission: 400 with what the task
    asks and the server with the most scratch; no run, no task, no file."""
    response = lab.person.client.post("/api/runs/", {"workflow": SCRATCH_HOG}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "plan_refused"
    assert "100000 GiB scratch" in body["detail"]
    assert re.search(
        r"no node has room for its scratch: the largest, \S+ offers .* GiB scratch", body["detail"]
    )
    assert (Run.objects.count(), Task.objects.count()) == (0, 0)
    runs_dir = store / "runs"
    assert not runs_dir.exists() or not any(runs_dir.iterdir())


# --- cancel ---------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["person", "agent", "owner"])
def test_a_run_is_cancelled_by_its_person_their_agent_or_the_owner(lab: Lab, who: str) -> None:
    """C16: cancel writes the run cancelled; its person, their agents and the owner may."""
    run = factories.run(by=lab.person.identity)
    response = getattr(lab, who).client.post(f"/api/runs/{run.id}/cancel/")
    assert response.status_code == 200, response.json()
    assert response.json()["state"] == "cancelled"
    assert response.json()["pending"] == "cancelling"  # until a worker has settled it
    run.refresh_from_db()
    assert run.state == RunState.CANCELLED


@pytest.mark.parametrize("who", ["other", "agent"])
def test_someone_elses_run_cannot_be_cancelled(lab: Lab, who: str) -> None:
    """C16: only the run's person, their agents and the owner may cancel it: another person,
    or another person's agent, is refused. Someone else's run is readable, so the refusal is
    403 (not 404), naming whose run it is; nothing changes, and nothing is left to settle."""
    run = factories.run(by=lab.other.identity if who == "agent" else lab.person.identity)
    response = getattr(lab, who).client.post(f"/api/runs/{run.id}/cancel/")
    assert response.status_code == 403
    assert response.json()["code"] == "not_yours"
    assert "only they or the owner may cancel it" in response.json()["detail"]
    run.refresh_from_db()
    assert run.state == RunState.RUNNING
    assert (run.pending_cancel, run.pending_logs, run.message) == (False, False, "")
    assert run.tasks.get().state == "waiting"


def test_cancelling_an_ended_or_unknown_run_is_an_error(lab: Lab) -> None:
    """C16: an unknown run and an ended run are errors."""
    ended = factories.run(by=lab.person.identity, state="succeeded")
    assert lab.person.client.post(f"/api/runs/{ended.id}/cancel/").status_code == 409
    assert lab.person.client.post("/api/runs/nosuchrun/cancel/").status_code == 404


# --- delete ---------------------------------------------------------------------------------


def test_an_ended_run_is_marked_deleting_then_its_task_deletes_it_with_its_files(
    lab: Lab,
) -> None:
    """The answer (202) says "deleting"; `delete_run` (a worker's) removes
    the files and the record (tests/api/test_work_off_the_request.py has the worker)."""
    run = factories.run(by=lab.agent.identity, state="failed", ended_at=timezone.now())
    (run_paths(run.id).root / "tasks").mkdir(parents=True)
    (run_paths(run.id).root / "tasks" / "out.txt").write_bytes(b"x" * 10)
    response = lab.person.client.delete(f"/api/runs/{run.id}/")
    assert response.status_code == 202
    assert (response.json()["state"], response.json()["pending"]) == ("failed", "deleting")
    assert run_paths(run.id).root.exists()
    listed = lab.person.client.get("/api/runs/").json()["runs"]
    assert [(r["id"], r["pending"]) for r in listed] == [(run.id, "deleting")]
    delete_run(run.id)
    assert not run_paths(run.id).root.exists()
    assert not Run.objects.filter(pk=run.id).exists()


def test_deleting_is_refused_for_others_live_and_unknown_runs(lab: Lab) -> None:
    ended = factories.run(by=lab.person.identity, state="succeeded")
    live = factories.run(by=lab.person.identity)
    assert lab.other.client.delete(f"/api/runs/{ended.id}/").status_code == 403
    assert lab.person.client.delete(f"/api/runs/{live.id}/").status_code == 409
    assert lab.person.client.delete("/api/runs/nosuchrun/").status_code == 404
    assert Run.objects.filter(pk__in=[ended.id, live.id]).count() == 2


def test_a_task_of_more_units_than_a_task_may_have_is_400_naming_the_task(
    lab: Lab, settings: object
) -> None:
    """SIMRUN_MAX_UNITS_PER_TASK bounds what a submission lists and keys; nothing recorded."""
    settings.SIMRUN_MAX_UNITS_PER_TASK = 1000  # type: ignore[attr-defined]
    workflow = {
        "name": "wide",
        "tasks": [{"id": "many", "type": "sleep", "settings": {"units": 1001}}],
    }

    response = lab.agent.client.post("/api/runs/", {"workflow": workflow}, format="json")

    assert response.status_code == 400, response.json()
    [error] = response.json()["errors"]
    assert error["task"] == "many"
    assert error["text"].startswith(
        "task 'many': settings: 1,001 units, more than the 1,000 a task may have: make each unit "
        "do more (SIMRUN_MAX_UNITS_PER_TASK is 1,000;"
    )
    assert not Run.objects.exists()

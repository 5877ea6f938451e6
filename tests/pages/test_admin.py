"""The admin: runs with tasks and actions, identities, tokens, observations, snapshots."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from runs.models import ResourceObservation, Run, Snapshot, Token
from runs.services.identities import hash_token, identity_for_token
from runs.tasks import settle_run
from tests import factories
from tests.pages.scenes import scan_run

pytestmark = pytest.mark.django_db


def test_the_run_list_filters_by_state_owner_and_group(olivia: Client) -> None:
    hit = scan_run(group="g1")
    other = factories.run(state="failed", group="g2")
    html = olivia.get("/admin/runs/run/?state__exact=running&group=g1").content.decode()
    listed = html.split('id="result_list"', 1)[1]
    assert hit.id in listed and other.id not in listed
    assert olivia.get(f"/admin/runs/run/?owner__id__exact={hit.owner_id}").status_code == 200


def test_a_run_shows_its_tasks_inline_and_cannot_be_edited(olivia: Client) -> None:
    run = scan_run()
    html = olivia.get(f"/admin/runs/run/{run.id}/change/").content.decode()
    assert "summary" in html and "scan" in html
    assert 'name="state"' not in html  # read-only


def test_the_cancel_action_cancels_live_runs_as_the_admin(olivia: Client) -> None:
    run = scan_run()
    ended = factories.run(state="succeeded")
    response = olivia.post(
        "/admin/runs/run/",
        {"action": "cancel_runs", "_selected_action": [run.id, ended.id]},
        follow=True,
    )
    run.refresh_from_db()
    assert run.state == "cancelled" and run.message == "cancelled by olivia"
    assert b"has ended" in response.content


def test_retry_pending_queues_the_settling_of_an_ended_run_for_a_worker(
    olivia: Client, django_capture_on_commit_callbacks: Any
) -> None:
    """The action answers without calling the backend: `settle_run` is queued for the runs
    with a step pending (what the worker then does settles them), none for the others."""
    run = factories.run(state="failed", pending_logs=True)
    done = factories.run(state="succeeded")
    with django_capture_on_commit_callbacks() as queued:
        response = olivia.post(
            "/admin/runs/run/",
            {"action": "retry_pending", "_selected_action": [run.id, done.id]},
            follow=True,
        )
    run.refresh_from_db()
    assert run.pending_logs  # nothing settled in the request
    assert len(queued) == 1
    assert f"Settling {run.id} in a worker" in response.content.decode()
    assert b"The other runs have nothing pending" in response.content
    settle_run(run.id)  # what the worker runs
    run.refresh_from_db()
    assert not run.pending_logs  # a workflow that is gone has no logs left to keep


def test_adding_a_token_shows_its_secret_once_and_stores_only_its_hash(olivia: Client) -> None:
    agent = factories.agent()
    response = olivia.post("/admin/runs/token/add/", {"identity": agent.pk, "label": "ci"})
    html = response.content.decode()
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    secret = html.split('id="new-token" type="text" readonly size="60" value="', 1)[1].split('"')[0]
    token = Token.objects.get(label="ci")
    assert token.hash == hash_token(secret) and secret.startswith(token.prefix)
    assert identity_for_token(secret) == agent
    assert secret not in olivia.get(f"/admin/runs/token/{token.pk}/change/").content.decode()


def test_the_revoke_action_revokes_tokens(olivia: Client) -> None:
    new = factories.token(factories.person())
    olivia.post("/admin/runs/token/", {"action": "revoke", "_selected_action": [new.token.pk]})
    assert identity_for_token(new.secret) is None


def test_identities_are_listed_with_their_kind(olivia: Client) -> None:
    factories.agent()
    html = olivia.get("/admin/runs/identity/?kind__exact=agent").content.decode()
    assert "ada" in html


def test_observations_are_read_only_and_filter_by_type(olivia: Client) -> None:
    ResourceObservation.objects.create(task_type="sleep", task_id="t", worker="t-w0")
    ResourceObservation.objects.create(task_type="spin", task_id="u", worker="u-w0")
    html = olivia.get("/admin/runs/resourceobservation/?task_type=sleep").content.decode()
    assert "t-w0" in html and "u-w0" not in html
    assert olivia.get("/admin/runs/resourceobservation/add/").status_code == 403
    observation = ResourceObservation.objects.get(task_type="sleep")
    change = olivia.get(f"/admin/runs/resourceobservation/{observation.pk}/change/")
    assert change.status_code == 200 and b'name="_save"' not in change.content


def test_snapshots_are_read_only(olivia: Client) -> None:
    snapshot = Snapshot.objects.create(digest="d" * 64, name="model")
    assert olivia.get("/admin/runs/snapshot/").status_code == 200
    assert olivia.get("/admin/runs/snapshot/add/").status_code == 403
    assert b'name="_save"' not in olivia.get(f"/admin/runs/snapshot/{snapshot.pk}/change/").content


def test_a_person_is_not_let_into_the_admin(paul: Client) -> None:
    assert paul.get("/admin/runs/run/").status_code == 302
    assert Run.objects.count() == 0


def test_the_submission_queue_shows_each_identitys_waiting_and_submitting_runs(
    olivia: Client,
) -> None:
    """An operator sees, per identity, its runs waiting for a worker and being submitted."""
    paul = factories.person()
    for _ in range(3):
        factories.run(by=paul, state="submitting")
    taken = factories.run(by=factories.other_person(), state="submitting")
    Run.objects.filter(pk=taken.pk).update(submit_lease_until=timezone.now() + timedelta(minutes=1))
    html = olivia.get("/admin/runs/submissionqueue/").content.decode()
    rows = {
        cells[0]: cells[2:4]
        for cells in (
            re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)
            for row in re.findall(r"<tr>(.*?)</tr>", html, flags=re.S)
        )
        if cells
    }
    assert rows["paul"] == ["3", "0"]
    assert rows["sam"] == ["0", "1"]

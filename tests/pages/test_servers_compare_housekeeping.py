"""Servers, compare, and the owner's cleanup and usage pages."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from pytest_django import Settings

from runs.backends import backend
from runs.models import Run
from runs.store import run_paths, task_paths
from runs.tasks import delete_run
from tests import factories
from tests.pages.scenes import scan_run
from tests.pages.streams import connect_url, events

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def test_servers_shows_each_node_with_its_capacity_and_bars(paul: Client) -> None:
    """S8: each server with the capacity it gives runs."""
    node = backend().nodes()[0]
    html = paul.get("/servers/").content.decode()
    assert f">{node.name}</h2>" in html
    assert f"Server {node.name}" in html  # the SVG's title
    assert "not reserved" in html


def test_servers_names_the_run_that_reserved_a_node(paul: Client) -> None:
    run = scan_run()
    node = backend().nodes()[0]
    backend().reserve(node.name, run.id)
    html = paul.get("/servers/").content.decode()
    assert f'reserved by run <a href="/runs/{run.id}/">{run.id}</a>' in html


def test_servers_refresh_answers_the_list_alone(paul: Client) -> None:
    html = paul.get("/servers/", HTTP_HX_TARGET="servers-live", **HX).content.decode()
    assert html.lstrip().startswith('<div id="servers-live"') and "<html" not in html


def test_servers_follow_their_stream_which_sends_the_servers_when_they_changed(
    paul: Client,
) -> None:
    """The page polls nothing: its stream asks the backend and sends the servers' part only
    when it differs from the one shown (a node reserved, here)."""
    html = paul.get("/servers/").content.decode()
    assert 'hx-trigger="every' not in html
    url = connect_url(html)
    assert url.startswith("/servers/events/?seen=")
    assert events(paul, url) == []
    run = scan_run()
    backend().reserve(backend().nodes()[0].name, run.id)
    sent = events(paul, url)
    assert [kind for kind, _ in sent] == ["servers"]
    assert "reserved by run <a href=" in sent[0][1] and 'sse-swap="servers"' in sent[0][1]


def test_the_servers_stream_refuses_a_bad_digest(paul: Client) -> None:
    response = paul.get("/servers/events/?seen=not-hex")
    assert response.status_code == 400 and "seen: 'not-hex' is not a digest" in response.text


def test_compare_shows_runs_side_by_side_and_marks_differences(paul: Client) -> None:
    """S14: runs side by side; the rows that differ are marked in text and colour."""
    a = scan_run(group="g1")
    b = scan_run(group="g2")
    html = paul.get(f"/compare/?runs={a.id}&runs={b.id}").content.decode()
    assert html.count('class="differs"') >= 1
    group_row = html.split("<code>group</code>", 1)[1].split("</tr>", 1)[0]
    assert "differs" in group_row and "g1" in group_row and "g2" in group_row
    name_row = html.split("<code>workflow</code>", 1)[1].split("</tr>", 1)[0]
    assert "differs" not in name_row


def test_compare_can_show_only_the_differences(paul: Client) -> None:
    a, b = scan_run(group="g1"), scan_run(group="g2")
    html = paul.get(f"/compare/?runs={a.id}+{b.id}&only=diff").content.decode()
    assert "<code>group</code>" in html and "<code>workflow</code>" not in html


def test_compare_says_which_runs_outputs_it_did_not_compare_in_time(
    paul: Client, settings: Settings
) -> None:
    """Past SIMRUN_COMPARE_MAX_S the page says which runs it did not compare, also when it
    shows only the differences."""
    settings.SIMRUN_COMPARE_MAX_S = 0.01
    a, b = scan_run(), scan_run()
    for run in (a, b):
        with (task_paths(run.id, "scan").out / "big.bin").open("wb") as handle:
            handle.truncate(256 * 1024 * 1024)
    html = paul.get(f"/compare/?runs={a.id}+{b.id}&only=diff").content.decode()
    notice = html.split('id="not-compared"', 1)[1].split("</div>", 1)[0]
    assert b.id in notice and "SIMRUN_COMPARE_MAX_S" in notice


def test_compare_needs_two_runs_and_names_unknown_ones(paul: Client) -> None:
    a = scan_run()
    one = paul.get(f"/compare/?runs={a.id}")
    assert one.status_code == 400 and b"at least two different runs" in one.content
    unknown = paul.get(f"/compare/?runs={a.id}&runs=nosuch")
    assert unknown.status_code == 400 and b"no run &#x27;nosuch&#x27;" in unknown.content


def test_compare_without_runs_shows_the_form(paul: Client) -> None:
    response = paul.get("/compare/")
    assert response.status_code == 200 and b'name="runs"' in response.content


def old_run(**fields: object) -> Run:
    run = factories.run(state="failed", **fields)
    Run.objects.filter(pk=run.pk).update(ended_at=timezone.now() - timedelta(days=40))
    run_paths(run.id).root.mkdir(parents=True, exist_ok=True)
    (run_paths(run.id).root / "run.json").write_text("{}")
    return run


def test_a_cleanup_dry_run_lists_what_would_go_and_removes_nothing(olivia: Client) -> None:
    run = old_run()
    response = olivia.post("/cleanup/", {"older_than_days": "30", "dry_run": "on"})
    html = response.content.decode()
    assert "Would remove 1 run" in html and f"runs/{run.id}" in html
    assert Run.objects.filter(pk=run.pk).exists()


def test_a_cleanup_removes_old_ended_runs_and_says_what(olivia: Client) -> None:
    """S12: a cleanup of ended runs by age says what it removed."""
    run = old_run()
    recent = factories.run(state="failed")
    html = olivia.post("/cleanup/", {"older_than_days": "30"}).content.decode()
    assert "Deleting 1 run" in html and run.id in html
    assert Run.objects.get(pk=run.pk).deleting
    delete_run(run.id)  # what the worker runs
    assert not Run.objects.filter(pk=run.pk).exists()
    assert Run.objects.filter(pk=recent.pk).exists()
    assert not run_paths(run.id).root.exists()


def test_a_cleanup_with_a_negative_age_is_refused(olivia: Client) -> None:
    response = olivia.post("/cleanup/", {"older_than_days": "-1"})
    assert response.status_code == 400


def test_a_person_cannot_post_a_cleanup(paul: Client) -> None:
    run = old_run()
    assert paul.post("/cleanup/", {"older_than_days": "0"}).status_code == 403
    assert Run.objects.filter(pk=run.pk).exists()


def test_usage_counts_bytes_per_run_and_per_group(olivia: Client) -> None:
    """S13: bytes of the store per run and per group."""
    run = scan_run(group="study-b")
    html = olivia.get("/usage/").content.decode()
    assert f'<a href="/runs/{run.id}/">{run.id}</a>' in html
    assert '<th scope="row">study-b</th>' in html

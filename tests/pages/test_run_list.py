"""The runs: filters, search, state badges, live progress of active runs."""

from __future__ import annotations

import pytest
from django.test import Client

from tests import factories
from tests.pages.scenes import scan_run

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def rows(html: str) -> list[str]:
    return [part.split('"', 1)[0] for part in html.split('<tr data-run="')[1:]]


def test_runs_are_listed_newest_first_with_state_owner_group_and_progress(paul: Client) -> None:
    """S7: an active run shows its progress (the mean over its tasks); an ended one none."""
    old = factories.run(state="succeeded", group="g1")
    new = scan_run()
    html = paul.get("/").content.decode()
    assert rows(html) == [new.id, old.id]
    assert '<span class="badge state-succeeded">succeeded</span>' in html
    assert f'aria-label="Progress of {new.id}"' in html
    assert f'aria-label="Progress of {old.id}"' not in html  # ended: no bar
    assert "study-a" in html and "paul" in html


def test_filters_by_state_owner_and_group(paul: Client) -> None:
    mine = factories.run(state="failed", group="g1")
    theirs = factories.run(by=factories.other_person(), state="running", group="g2")
    assert rows(paul.get("/?state=failed").content.decode()) == [mine.id]
    assert rows(paul.get("/?state=live").content.decode()) == [theirs.id]
    assert rows(paul.get("/?owner=sam").content.decode()) == [theirs.id]
    assert rows(paul.get("/?group=g1").content.decode()) == [mine.id]


def test_search_finds_runs_by_message_or_id(paul: Client) -> None:
    hit = factories.run(state="failed", message="pod scan-w0 failed with exit code 3")
    factories.run(state="succeeded")
    assert rows(paul.get("/?q=exit+code").content.decode()) == [hit.id]
    assert rows(paul.get(f"/?q={hit.id[-6:]}").content.decode()) == [hit.id]


def test_a_filter_change_by_htmx_answers_the_table_alone(paul: Client) -> None:
    factories.run()
    response = paul.get("/?state=running", HTTP_HX_TARGET="runs-table", **HX)
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="runs-table"') and "<html" not in html


def test_an_unknown_state_filter_is_refused_by_the_form(paul: Client) -> None:
    response = paul.get("/?state=sleeping")
    assert response.status_code == 200
    assert b"Select a valid choice" in response.content


def test_an_empty_list_says_so(paul: Client) -> None:
    assert b"No runs match." in paul.get("/").content

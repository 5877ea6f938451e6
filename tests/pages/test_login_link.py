"""One-time login links (`simrun login`, printed by serve and demo --keep): once, within
minutes, for the owner or a person; never for an agent."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.test import Client

from runs.services.identities import owner_identity
from runs.services.login_links import TOKENS, NoLoginLink, login_link_path
from tests import factories

pytestmark = pytest.mark.django_db


def test_a_link_logs_in_once_and_the_owner_reaches_the_admin() -> None:
    path = login_link_path(owner_identity())
    browser = Client()

    first = browser.get(path)

    assert (first.status_code, first["Location"]) == (302, "/")
    assert browser.get("/").status_code == 200
    assert browser.get("/admin/").status_code == 200
    assert Client().get(path).status_code == 410


def test_a_link_older_than_its_minutes_is_gone(
    monkeypatch: pytest.MonkeyPatch, settings: object
) -> None:
    settings.SIMRUN_LOGIN_LINK_S = 600  # type: ignore[attr-defined]
    path = login_link_path(owner_identity())
    later = datetime.now() + timedelta(seconds=601)
    monkeypatch.setattr(TOKENS, "_now", lambda: later)

    gone = Client().get(path)

    assert gone.status_code == 410
    assert "simrun login" in gone.content.decode()


def test_a_link_made_up_or_altered_logs_nobody_in() -> None:
    path = login_link_path(owner_identity())
    altered = path[:-3] + ("a" if path[-2] != "a" else "b") + "/"
    for made_up in (altered, "/login/link/MQ/1-2/", "/login/link/x/y/", "/login/link/MQ/zz/"):
        assert Client().get(made_up).status_code == 410, made_up


def test_an_agent_has_no_login_link() -> None:
    agent = factories.agent()
    with pytest.raises(NoLoginLink):
        login_link_path(agent)

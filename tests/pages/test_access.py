"""Who may open the pages: logged-in users with an identity; the owner for the lab pages."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db

PAGES = ["/", "/servers/", "/compare/", "/submit/", "/submit/types/sleep/"]
OWNER_PAGES = ["/cleanup/", "/usage/"]


@pytest.mark.parametrize("url", PAGES + OWNER_PAGES)
def test_an_anonymous_visitor_is_sent_to_the_login_page(client: Client, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(f"/login/?next={url}")


@pytest.mark.parametrize("url", PAGES)
def test_a_user_without_an_identity_gets_a_403_that_says_why(client: Client, url: str) -> None:
    get_user_model().objects.create_user(username="visitor", password="visitor-pw-123")
    client.login(username="visitor", password="visitor-pw-123")
    response = client.get(url)
    assert response.status_code == 403
    assert b"has no simrun identity" in response.content


@pytest.mark.parametrize("url", OWNER_PAGES)
def test_the_lab_pages_are_forbidden_to_a_person(paul: Client, url: str) -> None:
    response = paul.get(url)
    assert response.status_code == 403
    assert b"Only the owner of the lab" in response.content


@pytest.mark.parametrize("url", PAGES + OWNER_PAGES)
def test_the_owner_opens_every_page(olivia: Client, url: str) -> None:
    assert olivia.get(url).status_code == 200


def test_the_login_page_logs_a_person_in_and_returns_to_the_runs(
    client: Client, paul: Client
) -> None:
    response = client.post("/login/", {"username": "paul", "password": "paul-pw-123"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200


def test_a_wrong_password_is_refused_with_a_message(client: Client, paul: Client) -> None:
    response = client.post("/login/", {"username": "paul", "password": "wrong"})
    assert response.status_code == 200
    assert b'role="alert"' in response.content


def test_logging_out_ends_the_session(paul: Client) -> None:
    assert paul.post("/logout/").status_code == 302
    assert paul.get("/").status_code == 302


def test_the_navigation_shows_the_lab_pages_to_the_owner_only(olivia: Client, paul: Client) -> None:
    assert b'href="/cleanup/"' in olivia.get("/").content
    assert b'href="/cleanup/"' not in paul.get("/").content


def test_htmx_is_served_from_the_projects_static_files(paul: Client) -> None:
    html = paul.get("/").content.decode()
    assert '<script src="/static/runs/htmx.min.js" defer></script>' in html
    assert 'hx-headers=\'{"X-CSRFToken": "' in html

"""Logged-in clients of the named people, and a fresh backend per test (its store moves)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import Client
from playwright.sync_api import Browser, expect
from pytest_django import Settings

from runs.backends import backend
from tests import factories
from tests.pages.browsing import chromium
from tests.waiting import DEADLINE_S

# Playwright's assertions wait 5 s by default for the page to show what they expect: a page
# updated by its event stream, in a browser sharing two loaded cores with the server and
# the test, gets the suite's deadline instead (spent only when the page never shows it)
expect.set_options(timeout=DEADLINE_S * 1000)


@pytest.fixture(autouse=True)
def page_settings(settings: Settings, tmp_path: Path) -> None:
    """Fast password hashing (tests need no strength; the default takes a second here) and a
    collected-static directory of the test's own (WhiteNoise warns when there is none)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.STATIC_ROOT = tmp_path / "static"
    settings.STATIC_ROOT.mkdir()


@pytest.fixture(autouse=True)
def fresh_backend(request: pytest.FixtureRequest) -> Iterator[None]:
    """The backend is cached per process; each test has its own store.

    Tests on the real stack get theirs from the `services` fixture of tests/e2e instead.
    """
    if "services" not in request.fixturenames:
        request.getfixturevalue("store")
    backend.cache_clear()
    yield
    backend.cache_clear()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """A headless Chromium, shared by a module's tests."""
    with chromium() as the_browser:
        yield the_browser


def logged_in(name: str) -> Client:
    client = Client()
    assert client.login(username=name, password=f"{name}-pw-123")
    return client


@pytest.fixture
def paul(db: None) -> Client:
    """A person of the lab."""
    factories.person()
    return logged_in(factories.PERSON)


@pytest.fixture
def olivia(db: None) -> Client:
    """The owner of the lab."""
    factories.owner()
    return logged_in(factories.OWNER)


@pytest.fixture
def sam(db: None) -> Client:
    """Another person."""
    factories.other_person()
    return logged_in(factories.OTHER_PERSON)

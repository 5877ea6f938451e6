"""Fixtures shared by every suite: an empty run store per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings
from pytest_django import Settings

# Property tests draw the same examples at every run unless told otherwise: a run of the
# README's test command (or CI) must not fail by the luck of its draw. `fuzz` draws anew each
# time, to hunt for what the repeatable draw misses (docs/testing.md).
hypothesis_settings.register_profile("repeatable", derandomize=True, database=None)
hypothesis_settings.register_profile("fuzz", derandomize=False, print_blob=True)
hypothesis_settings.load_profile(os.environ.get("SIMRUN_HYPOTHESIS", "repeatable"))

# A `simrun` run verb with no service to talk to starts `simrun serve` in the background: not
# for a command a test runs with its own environment (those of a user's, `clean_env`, do).
os.environ["SIMRUN_AUTOSTART"] = "false"


@pytest.fixture(autouse=True, scope="session")
def plugin_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The answers of plugin hosts kept in a directory of the session's (what the processes
    the tests start inherit), never in the user's cache."""
    root = tmp_path_factory.mktemp("plugin-cache")
    before = os.environ.get("SIMRUN_PLUGIN_CACHE")
    os.environ["SIMRUN_PLUGIN_CACHE"] = str(root)
    yield root
    if before is None:
        os.environ.pop("SIMRUN_PLUGIN_CACHE", None)
    else:
        os.environ["SIMRUN_PLUGIN_CACHE"] = before


@pytest.fixture
def store(tmp_path: Path, settings: Settings) -> Iterator[Path]:
    """A fresh run store, set as SIMRUN_STORE for the test, and a fresh cache of what views
    read of it (SIMRUN_VIEW_CACHE)."""
    root = tmp_path / "store"
    root.mkdir()
    settings.SIMRUN_STORE = root
    settings.SIMRUN_VIEW_CACHE = tmp_path / "view-cache"
    yield root


@pytest.fixture
def simrun_api(
    transactional_db: None, store: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The API served on the test database, and `simrun`'s run verbs pointed at it with the
    owner's token (SIMRUN_URL, SIMRUN_TOKEN) and the store mounted here (SIMRUN_STORE), as
    for an operator on a server of the lab. Yields the URL."""
    from tests import factories
    from tests.api.live import serving

    secret = factories.token(factories.owner()).secret
    with serving() as url:
        monkeypatch.setenv("SIMRUN_URL", url)
        monkeypatch.setenv("SIMRUN_TOKEN", secret)
        monkeypatch.setenv("SIMRUN_STORE", str(store))
        yield url

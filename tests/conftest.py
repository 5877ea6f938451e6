"""Fixtures shared by every suite: an empty run store per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_django import Settings


@pytest.fixture
def store(tmp_path: Path, settings: Settings) -> Iterator[Path]:
    """A fresh run store, set as SIMRUN_STORE for the test."""
    root = tmp_path / "store"
    root.mkdir()
    settings.SIMRUN_STORE = root
    yield root

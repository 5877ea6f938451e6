"""Fixtures of the command line's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.serving import migrated_data_dir


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory as `manage.py migrate` makes it; each test copies it."""
    return migrated_data_dir(tmp_path_factory.mktemp("installed") / "data")

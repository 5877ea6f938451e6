"""SIMRUN_LOCAL_STANDBY: how many environments keep a standby pod (default 2); 0 turns it off."""

from __future__ import annotations

from pathlib import Path

from pytest_django import Settings


def test_the_local_backend_keeps_standbys_unless_the_setting_turns_them_off(
    settings: Settings, tmp_path: Path
) -> None:
    from cluster.local.backend import LocalBackend
    from runs.backends import backend

    settings.SIMRUN_BACKEND = "local"
    settings.SIMRUN_STORE = tmp_path
    try:
        backend.cache_clear()
        made = backend()
        assert isinstance(made, LocalBackend)
        assert made._standbys is not None and made._standbys.count == 2
        settings.SIMRUN_LOCAL_STANDBY = 0
        backend.cache_clear()
        made = backend()
        assert isinstance(made, LocalBackend) and made._standbys is None
    finally:
        backend.cache_clear()

"""What every `simrun` command shares, below `main` (which registers the commands): its
one-line error and the lazy Django set-up. Kept apart so no command imports `main`."""

from __future__ import annotations

import os
import sys


def setup_django() -> None:
    """Configure Django for direct use (idempotent)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simrun_site.settings")
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()


def django_ready() -> bool:
    """Whether Django is set up in this process already (by manage.py, a test), looked up
    without importing it."""
    apps = sys.modules.get("django.apps")
    return apps is not None and bool(apps.apps.ready)


class CommandError(Exception):
    """A failure to report as one line on stderr with exit status 1 (or `code`)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code

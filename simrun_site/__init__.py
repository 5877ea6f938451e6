"""The Django project of simrun: settings, URLs, the Celery app.

The Celery app is loaded when Django is set up (`runs.apps`) or asked for here, not on import
of this package: `simrun` commands that read `simrun_site.installation` must start fast.
"""

from typing import Any

__all__ = ["celery_app"]


def __getattr__(name: str) -> Any:
    if name == "celery_app":
        from simrun_site.celery import app

        return app
    raise AttributeError(f"module 'simrun_site' has no attribute {name!r}")

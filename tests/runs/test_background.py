"""The services enqueue Celery tasks by name (`runs/services/background.py`): every name is a
task that `runs/tasks.py` registers, in every process where Django is set up."""

from __future__ import annotations

from runs.services import background
from simrun_site.celery import app


def test_every_task_the_services_name_is_registered() -> None:
    missing = [name for name in background.TASKS if name not in app.tasks]

    assert not missing, f"background names tasks no module registers: {missing}"

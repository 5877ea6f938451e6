"""The Celery app: submissions and image builds on workers, reconciliation on beat."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simrun_site.settings")

app = Celery("simrun")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["runs"])

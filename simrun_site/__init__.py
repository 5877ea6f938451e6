"""The Django project of simrun: settings, URLs, the Celery app."""

from simrun_site.celery import app as celery_app

__all__ = ["celery_app"]

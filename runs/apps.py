"""The Django app of the domain."""

from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "simrun"
    default_auto_field = "django.db.models.BigAutoField"

"""The Django app of the domain."""

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_delete


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "simrun"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import simrun_site.celery  # noqa: F401  the app shared tasks are sent with, made current
        from runs import tasks  # noqa: F401  registers the Celery tasks services enqueue by name
        from runs.models import Token

        post_delete.connect(_forget_deleted_token, sender=Token, dispatch_uid="forget-token")


def _forget_deleted_token(sender: type, instance: Any, **kwargs: Any) -> None:
    """A token deleted here (with its identity, or in the admin) stops working at once."""
    from runs.token_checks import token_checks

    token_checks.forget(instance.hash)

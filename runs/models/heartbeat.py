"""The controller's heartbeat: when each process that reconciles last finished a pass."""

from __future__ import annotations

from django.db import models


class Heartbeat(models.Model):
    """One row per reconciling process kind (`watcher`, `worker`), touched by every tick.

    A row in the database rather than a file in the data directory: on a cluster the web
    pods, the Celery workers and the watcher share the database, not a directory, and the
    pages, the API and the CLI all read it the same way.
    """

    source = models.CharField(primary_key=True, max_length=32)
    at = models.DateTimeField(help_text="When its last reconcile pass ended.")

    def __str__(self) -> str:
        return f"{self.source} at {self.at.isoformat()}"

"""The metadata of an immutable source snapshot; its files live in the run store."""

from __future__ import annotations

from django.db import models


class Snapshot(models.Model):
    """A directory of sources frozen by content: `snapshots/<digest>/` in the store."""

    digest = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=255, blank=True, default="")
    source_path = models.CharField(max_length=1024, blank=True, default="")
    git_remote = models.CharField(max_length=1024, blank=True, default="")
    git_commit = models.CharField(max_length=64, blank=True, default="")
    git_dirty = models.BooleanField(null=True, blank=True)
    files = models.PositiveIntegerField(default=0)
    bytes = models.PositiveBigIntegerField(default=0)
    created_by = models.ForeignKey(
        "runs.Identity", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name or 'snapshot'} {self.digest[:12]}"

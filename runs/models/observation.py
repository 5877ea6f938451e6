"""What a pod's attempt used: the history the resource resolution and the estimate learn from."""

from __future__ import annotations

from django.db import models

WORKER, MERGE = "worker", "merge"
ROLES = [(WORKER, "worker"), (MERGE, "merge")]


class ResourceObservation(models.Model):
    """One attempt of one pod, from its report (or its limit, for a kill without a report)."""

    task_type = models.CharField(max_length=128)
    model_digest = models.CharField(max_length=64, blank=True, default="")
    run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="observations"
    )
    task_id = models.CharField(max_length=128)
    worker = models.CharField(max_length=160)
    role = models.CharField(max_length=16, choices=ROLES, default=WORKER)
    """A unit-running pod's (`worker`) or a merge pod's (`merge`): kept apart, as a merge
    needs what merges needed, not what unit processes did."""
    attempt = models.PositiveIntegerField(default=0)
    node = models.CharField(max_length=253, blank=True, default="")
    processes = models.PositiveIntegerField(default=1)
    units_done = models.PositiveIntegerField(default=0)
    unit_seconds_median = models.FloatField(null=True, blank=True)
    unit_seconds_max = models.FloatField(null=True, blank=True)
    peak_memory_per_process_gb = models.FloatField(null=True, blank=True)
    peak_memory_gb = models.FloatField(null=True, blank=True)
    memory_limit_gb = models.FloatField(null=True, blank=True)
    memory_per_worker_gb = models.FloatField(null=True, blank=True)
    oom_killed = models.BooleanField(default=False)
    from_report = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["task_type", "model_digest", "-created_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "task_id", "worker", "attempt"], name="observation_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_type} {self.worker}#{self.attempt}"

"""A run of a workflow and its tasks: the controller's state, written only if unchanged."""

from __future__ import annotations

import secrets
import time
from typing import NotRequired, TypedDict

from django.db import models
from django.db.models import Q
from django.utils import timezone

from runs.models.identity import Identity
from runs.states import RunState, TaskState

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
_RANDOM_CHARS = 8


def new_run_id() -> str:
    """A short, time-ordered, lowercase id that is a valid Kubernetes name and label value.

    The millisecond stamp orders ids; the random tail keeps ids made in the same millisecond
    apart (8 characters: 36**8 ≈ 2.8e12, so even thousands in one millisecond almost never
    meet; 4 once let two of 50 made in a loop collide).
    """
    millis = int(time.time() * 1000)
    stamp = ""
    while millis:
        millis, digit = divmod(millis, 36)
        stamp = _ALPHABET[digit] + stamp
    return stamp + "".join(secrets.choice(_ALPHABET) for _ in range(_RANDOM_CHARS))


class StoredPod(TypedDict):
    """One pod of `Run.pods` (pod name → this), as the controller stores it at every poll."""

    phase: str  # a runs.ports.PodPhase
    attempts: int
    node: str | None
    exit_code: int | None


class RunEnvironment(TypedDict):
    """`Run.environment`: the environment the run's pods used, once submitted."""

    ref: str  # its digest (or `service`: the service's own)
    local_packages: NotRequired[list[dict[str, str]]]  # name and digest of each it installs


# `Run.oom_kills`: worker → the attempts killed for memory; `Run.merge_pending`: task → when
# (ISO 8601) its merge marker began to be awaited
OomKills = dict[str, list[int]]
MergePending = dict[str, str]


class RunQuerySet(models.QuerySet["Run"]):
    """Every update of runs stamps `updated_at` (unless it sets it itself), as `save` does:
    the controller reads only the rows written since its last pass (`controller/followed.py`),
    so no writer may change a run without saying when."""

    def update(self, **kwargs: object) -> int:
        kwargs.setdefault("updated_at", timezone.now())
        return super().update(**kwargs)


class Run(models.Model):
    """One submission of a workflow, with everything the controller needs to continue it."""

    id = models.CharField(primary_key=True, max_length=24, default=new_run_id, editable=False)
    name = models.CharField(max_length=128, help_text="The workflow's name.")
    owner = models.ForeignKey(Identity, on_delete=models.PROTECT, related_name="runs")
    principal = models.ForeignKey(
        Identity,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Whose run it counts as (an agent's person): who may cancel or delete it.",
    )
    tier = models.CharField(max_length=8, help_text="Priority tier: owner, person or agent.")
    group = models.CharField(max_length=128, blank=True, default="")
    state = models.CharField(max_length=12, choices=RunState.choices(), default=RunState.SUBMITTING)
    message = models.TextField(blank=True, default="")
    workflow = models.JSONField(help_text="The workflow as validated (normalised JSON).")
    workflow_name = models.CharField(max_length=64, unique=True)
    sources = models.JSONField(default=list, help_text="Snapshot digests, the model first.")
    environment = models.JSONField(default=dict, blank=True)  # a RunEnvironment
    reserve = models.CharField(max_length=253, blank=True, default="")
    reserved = models.BooleanField(default=False, help_text="The node reservation was made.")
    oom_kills = models.JSONField(
        default=dict, blank=True, help_text="Worker → attempts killed for memory."
    )
    pods = models.JSONField(  # pod → StoredPod
        default=dict, blank=True, help_text="Pod → phase, attempts, node: stored at every poll."
    )
    merge_pending = models.JSONField(
        default=dict, blank=True, help_text="Task → when its merge marker began to be awaited."
    )
    pending_release = models.BooleanField(default=False)
    pending_cancel = models.BooleanField(default=False)
    pending_logs = models.BooleanField(default=False)
    deleting = models.BooleanField(
        default=False, help_text="Deletion asked: its records and files go once nothing is pending."
    )
    # NULL, not "": runs without a key must not collide in the unique constraint below.
    submit_lease_until = models.DateTimeField(
        null=True, blank=True, help_text="A worker is submitting the run until then."
    )
    submit_queued_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the controller last sent it again (none yet: its first message "
        "was sent when it was created).",
    )
    submit_requeues = models.PositiveSmallIntegerField(
        default=0, help_text="Messages sent again for it by the controller (each waits longer)."
    )
    submit_building = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="The environment its worker builds (while its submission lease lasts): an "
        "identity builds SIMRUN_BUILDS_PER_IDENTITY at a time, an environment is built once "
        "(runs/services/builds.py).",
    )
    submit_build_waits = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="The environment it was given back to build once its identity's build (or "
        "another run's of it) ends; no worker takes it until then.",
    )
    idempotency_key = models.CharField(max_length=128, null=True, blank=True)  # noqa: DJ001
    reuse = models.BooleanField(
        default=True, help_text="Units done in earlier runs with the same key are reused."
    )
    resume_from = models.CharField(
        max_length=24, blank=True, default="", help_text="The run whose done units come first."
    )
    from_crate = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="The crate this run re-runs: the crate's identifier (the run it records) and "
        "the SHA-256 of its metadata file (docs/provenance.md).",
    )
    exports = models.PositiveIntegerField(
        default=0, help_text="How many times the run was exported as an RO-Crate."
    )
    version = models.PositiveIntegerField(default=0, help_text="Bumped by every write.")
    derived_from = models.CharField(
        max_length=96,
        blank=True,
        default="",
        help_text="`<version>:<digest>[@<revision>]`: the backend status the record at that "
        "version was derived from (runs/controller/seen.py), and what the backend read it from, "
        "so a restarted controller skips unchanged runs.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True, help_text="When the row was last written.")

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(
                fields=["state"],
                name="run_followed",
                condition=Q(state__in=RunState.live())
                | Q(pending_release=True)
                | Q(pending_cancel=True)
                | Q(pending_logs=True)
                | Q(deleting=True),
            ),
            models.Index(fields=["-created_at", "-id"], name="run_newest"),
            models.Index(fields=["updated_at"], name="run_updated"),  # the rows written since
            models.Index(fields=["owner", "-created_at"], name="run_owner_newest"),
            models.Index(fields=["principal", "-created_at"], name="run_principal_newest"),
            models.Index(fields=["group", "-created_at"], name="run_group_newest"),
            models.Index(fields=["state", "-created_at"], name="run_state_newest"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="run_idempotency_key_per_owner",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.name} ({self.state})"

    @property
    def ended(self) -> bool:
        return self.state in RunState.ended()

    @property
    def pending(self) -> str:
        """What the run is still doing after a cancel or a delete: "deleting", "cancelling"
        (its workflow, node or logs not settled yet), else ""."""
        if self.deleting:
            return "deleting"
        settling = self.pending_cancel or self.pending_release or self.pending_logs
        if self.state == RunState.CANCELLED and settling:
            return "cancelling"
        return ""


class Task(models.Model):
    """One task of a run: its settings, plan and the state the controller last derived."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tasks")
    task_id = models.CharField(max_length=128)
    position = models.PositiveIntegerField(help_text="Index in the run's topological order.")
    type = models.CharField(max_length=128)
    splittable = models.BooleanField(default=False)
    settings = models.JSONField(default=dict)
    inputs = models.JSONField(default=dict)
    dependencies = models.JSONField(default=list)
    resources = models.JSONField(default=dict, blank=True)
    plan = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=12, choices=TaskState.choices(), default=TaskState.WAITING)
    message = models.TextField(blank=True, default="")
    units_total = models.PositiveIntegerField(null=True, blank=True)
    observed = models.BooleanField(default=False, help_text="Reports recorded as observations.")
    logs_kept = models.BooleanField(default=False)
    key = models.CharField(
        max_length=64,
        blank=True,
        default="",
        db_index=True,
        help_text="Digest of what decides its output (docs/reuse.md); '' before submission.",
    )
    reused = models.JSONField(
        default=dict,
        blank=True,
        help_text="Run id → the units reused from that run: ranges [start, end) of unit"
        " indices (an earlier simrun wrote unit names).",
    )
    reuse_note = models.JSONField(
        default=dict,
        blank=True,
        help_text="Why it reused what it did: what it was compared with and the first part of"
        " the key that differed (runs/reuse_plans.py).",
    )
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "position"]
        indexes = [
            # The few tasks whose observations or logs are still to be kept (C11, C12): every
            # controller tick asks which followed runs have one, and without this index that
            # reads every task ever run.
            models.Index(
                fields=["run"],
                name="task_final_work",
                condition=Q(state__in=TaskState.final()) & (Q(observed=False) | Q(logs_kept=False)),
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["run", "task_id"], name="task_unique_per_run"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}/{self.task_id} ({self.state})"

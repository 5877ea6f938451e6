"""The operators' Django admin: runs and tasks, identities and tokens, observations, snapshots,
and the submissions waiting per identity.

Records the controller owns are read-only here; changes go through the domain services
(cancel_run, request_settling, create_token, revoke_token), so the admin follows the same
rules as the API and leaves the backend's work to a worker.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from runs.models import (
    Identity,
    ResourceObservation,
    Run,
    Snapshot,
    SubmissionQueue,
    Task,
    Token,
)
from runs.pages.access import identity_of
from runs.selectors.submission_queue import submission_queue
from runs.services.identities import IdentityError, create_token, revoke_token
from runs.services.runs import (
    NotAllowed,
    RunConflict,
    RunNotFound,
    cancel_run,
    request_settling,
)

admin.site.site_header = "simrun administration"
admin.site.site_title = "simrun admin"


class ReadOnlyMixin:
    """Every field shown, none editable; nothing added or deleted here."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        model = self.model  # type: ignore[attr-defined]
        return [f.name for f in model._meta.fields]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TaskInline(ReadOnlyMixin, admin.TabularInline):
    model = Task
    extra = 0
    can_delete = False
    fields = ("task_id", "position", "type", "splittable", "state", "units_total", "message")
    show_change_link = False


@admin.register(Run)
class RunAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("id", "name", "state", "owner", "group", "created_at", "pending")
    list_filter = ("state", "owner", "group", "pending_release", "pending_cancel", "pending_logs")
    search_fields = ("id", "name", "group", "owner__name", "message", "workflow_name")
    date_hierarchy = "created_at"
    inlines = (TaskInline,)
    actions = ("cancel_runs", "retry_pending")
    list_select_related = ("owner",)

    @admin.display(description="pending steps")
    def pending(self, run: Run) -> str:
        steps = [
            name
            for name, flag in (
                ("logs", run.pending_logs),
                ("cancel", run.pending_cancel),
                ("release", run.pending_release),
            )
            if flag
        ]
        return ", ".join(steps) or "—"

    @admin.action(description="Cancel the selected runs")
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        identity = identity_of(request)
        if identity is None:
            self.message_user(request, "Your user has no simrun identity.", messages.ERROR)
            return
        cancelled = []
        for run in queryset:
            try:
                cancel_run(run_id=run.pk, identity=identity)
                cancelled.append(run.pk)
            except (RunConflict, RunNotFound, NotAllowed) as exc:
                self.message_user(request, str(exc), messages.WARNING)
        if cancelled:
            self.message_user(request, f"Cancelled {', '.join(cancelled)}.", messages.SUCCESS)

    @admin.action(description="Retry pending logs, cancel and release")
    def retry_pending(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        queued = request_settling(run_ids=[run.pk for run in queryset])
        if queued:
            self.message_user(
                request,
                f"Settling {', '.join(queued)} in a worker; the Pending column shows what is "
                "left when you reload.",
                messages.SUCCESS,
            )
        if len(queued) < len(queryset):
            self.message_user(request, "The other runs have nothing pending.", messages.INFO)


class TokenInline(ReadOnlyMixin, admin.TabularInline):
    model = Token
    extra = 0
    can_delete = False
    fields = ("prefix", "label", "created_at", "last_used_at", "revoked_at")
    show_change_link = True


@admin.register(Identity)
class IdentityAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "user", "acts_for", "created_at")
    list_filter = ("kind",)
    search_fields = ("name", "user__username")
    autocomplete_fields = ("acts_for",)
    readonly_fields = ("submission_turn_at",)
    inlines = (TokenInline,)


@admin.register(SubmissionQueue)
class SubmissionQueueAdmin(admin.ModelAdmin):
    """Per identity: its runs waiting for a worker, being submitted, submitted in the last
    minute, and when a worker last took one of its runs (the fair share's turn; the identity
    served longest ago goes next). Read only: it changes with every submission."""

    list_display = (
        "name",
        "kind",
        "waiting",
        "in_progress",
        "last_minute",
        "waiting_since",
        "submission_turn_at",
    )
    list_display_links = None
    search_fields = ("name",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[SubmissionQueue]:
        return submission_queue(now=timezone.now())

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="waiting for a worker", ordering="waiting")
    def waiting(self, obj: Any) -> int:
        return int(obj.waiting)

    @admin.display(description="being submitted", ordering="in_progress")
    def in_progress(self, obj: Any) -> int:
        return int(obj.in_progress)

    @admin.display(description="submitted in the last minute", ordering="last_minute")
    def last_minute(self, obj: Any) -> int:
        return int(obj.last_minute)

    @admin.display(description="oldest waiting since", ordering="waiting_since")
    def waiting_since(self, obj: Any) -> Any:
        return obj.waiting_since


@admin.register(Token)
class TokenAdmin(admin.ModelAdmin):
    """Add creates a token through create_token and shows its secret once; revoke is an action."""

    list_display = ("prefix", "identity", "label", "created_at", "last_used_at", "active")
    list_filter = ("identity__kind", ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("prefix", "label", "identity__name")
    actions = ("revoke",)
    list_select_related = ("identity",)

    def get_fields(self, request: HttpRequest, obj: Token | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("identity", "label")
        return ("identity", "label", "prefix", "created_at", "last_used_at", "revoked_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Token | None = None) -> list[str]:
        if obj is None:
            return []
        return ["identity", "prefix", "created_at", "last_used_at", "revoked_at"]

    def has_delete_permission(self, request: HttpRequest, obj: Token | None = None) -> bool:
        return False

    @admin.display(boolean=True, description="active")
    def active(self, token: Token) -> bool:
        return token.active

    def save_model(self, request: HttpRequest, obj: Token, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        new = create_token(identity=obj.identity, label=obj.label)
        obj.__dict__.update({k: v for k, v in new.token.__dict__.items() if k != "_state"})
        obj._state.adding = False
        request._simrun_secret = new.secret  # type: ignore[attr-defined]

    def response_add(
        self, request: HttpRequest, obj: Token, post_url_continue: str | None = None
    ) -> HttpResponse:
        """The one page that shows the secret; it is never stored, so never shown again."""
        response = TemplateResponse(
            request,
            "admin/runs/token/created.html",
            {
                **self.admin_site.each_context(request),
                "title": "Token created",
                "token": obj,
                "secret": getattr(request, "_simrun_secret", ""),
                "opts": self.model._meta,
            },
        )
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[Token]) -> None:
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True):
            try:
                revoke_token(prefix_or_id=str(token.pk))
                revoked += 1
            except IdentityError as exc:
                self.message_user(request, str(exc), messages.WARNING)
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)


@admin.register(ResourceObservation)
class ResourceObservationAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = (
        "task_type",
        "run",
        "task_id",
        "worker",
        "attempt",
        "processes",
        "units_done",
        "peak_memory_gb",
        "memory_limit_gb",
        "oom_killed",
        "created_at",
    )
    list_filter = ("task_type", "oom_killed", "from_report")
    search_fields = ("task_type", "task_id", "worker", "run__id", "model_digest")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Snapshot)
class SnapshotAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = (
        "short_digest",
        "name",
        "files",
        "bytes",
        "git_commit",
        "created_by",
        "created_at",
    )
    search_fields = ("digest", "name", "source_path", "git_remote", "git_commit")

    @admin.display(description="digest")
    def short_digest(self, snapshot: Snapshot) -> str:
        return snapshot.digest[:12]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

"""Runs: the list and its filters, a run with its tasks, workers, outputs, logs and event
stream."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from runs.selectors.runs_list import CURSOR, MAX_LIMIT
from runs.states import RunState

_STATE = "|".join([*RunState, "live", "ended"])
STATES = rf"^(({_STATE})(,({_STATE}))*)?$"


class RunItemSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField(help_text="The workflow's name.")
    state = serializers.ChoiceField(choices=RunState.choices())
    message = serializers.CharField(allow_blank=True)
    owner = serializers.CharField(help_text="Whose run it counts as (an agent's person).")
    submitted_by = serializers.CharField()
    tier = serializers.CharField()
    group = serializers.CharField(allow_blank=True)
    progress = serializers.FloatField(
        allow_null=True, help_text="0 to 1 while active (S7); null once ended."
    )
    created_at = serializers.DateTimeField()
    submitted_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)
    pending = serializers.ChoiceField(
        choices=["", "cancelling", "deleting"],
        help_text="What a worker still does after a cancel (its workflow, node and logs) or a "
        "delete (its record and files), answered at once; empty otherwise.",
    )


class RunPageSerializer(serializers.Serializer):
    runs = RunItemSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)


@extend_schema_field({"type": "string", "pattern": STATES})
class StatesField(serializers.CharField):
    """States to filter by; the selector says which part is no state."""


class RunListQuerySerializer(serializers.Serializer):
    """The filters of the run list; an empty one (`?group=`) is the same as none."""

    state = StatesField(
        required=False, allow_blank=True, help_text="Comma list of states, or live / ended."
    )
    group = serializers.CharField(required=False, allow_blank=True, max_length=128)
    owner = serializers.CharField(required=False, allow_blank=True, max_length=64)
    cursor = serializers.RegexField(
        f"^$|{CURSOR}", required=False, allow_blank=True, help_text="next_cursor as given."
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT, default=50)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A filter given twice (`?limit=5&limit=x`) is refused: which one was meant?"""
        given = getattr(self.initial_data, "getlist", None)
        if given is not None:
            names: list[str] = list(self.fields)
            twice = {n: "given more than once: give it once" for n in names if len(given(n)) > 1}
            if twice:
                raise serializers.ValidationError(twice)
        return attrs


class LedgerCountsSerializer(serializers.Serializer):
    pending = serializers.IntegerField()
    claimed = serializers.IntegerField()
    done = serializers.IntegerField()
    total = serializers.IntegerField()


class TaskSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    type = serializers.CharField()
    state = serializers.CharField()
    splittable = serializers.BooleanField()
    dependencies = serializers.ListField(child=serializers.CharField())
    units_total = serializers.IntegerField(allow_null=True)
    counts = LedgerCountsSerializer(allow_null=True)
    first = serializers.DictField(allow_null=True, help_text="The first progress line.")
    last = serializers.DictField(allow_null=True, help_text="The last progress line.")
    fraction = serializers.FloatField()
    message = serializers.CharField(allow_blank=True)
    started_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)
    reuse = serializers.DictField(
        help_text="Why the task reused what it did: `reused`, `units`, `text`, `compared_with`"
        " (the run it was compared with), `differs` (the first part of the key that differs:"
        " part, name, here, there; docs/reuse.md); {} before its submission keyed it."
    )


class ReuseSerializer(serializers.Serializer):
    reused = serializers.IntegerField(help_text="Units linked from earlier runs.")
    units = serializers.IntegerField(help_text="Units of the run (one per unsplit task).")
    sources = serializers.DictField(
        child=serializers.IntegerField(), help_text="Run → units reused from it."
    )
    enabled = serializers.BooleanField(help_text="Whether the run reuses done units.")
    resume_from = serializers.CharField(allow_blank=True)
    text = serializers.CharField(help_text='"reused N of M units"')


class DiskSerializer(serializers.Serializer):
    full = serializers.BooleanField()
    path = serializers.CharField(help_text="The service's directory on the full disk.")
    free_bytes = serializers.IntegerField()
    needed_bytes = serializers.IntegerField(
        help_text="Free space the service needs there (SIMRUN_DISK_MIN_FREE_MB)."
    )


class RunDetailSerializer(RunItemSerializer):
    workflow_name = serializers.CharField()
    workflow = serializers.JSONField()
    sources = serializers.JSONField()
    environment = serializers.JSONField()
    reserve = serializers.CharField(allow_blank=True)
    tasks = TaskSerializer(many=True)
    reuse = ReuseSerializer()
    from_crate = serializers.CharField(
        allow_blank=True,
        help_text="The crate this run was made again from: its identifier and the SHA-256 of "
        "its metadata file (empty: submitted here).",
    )
    exports = serializers.IntegerField(help_text="How many times it was exported as a crate.")
    may_change = serializers.BooleanField(help_text="Whether this token may cancel/delete it.")
    controller_idle_s = serializers.FloatField(
        allow_null=True,
        help_text="Seconds since the controller last reconciled (null: it never did).",
    )
    controller_late_s = serializers.FloatField(
        help_text=(
            "After this many seconds without a reconcile the controller counts as stopped "
            "(longer while the run is in submission: the watcher may be idle until then)."
        )
    )
    disk = DiskSerializer(
        allow_null=True,
        help_text="The service's disk that is full (nothing advances until space is freed); "
        "null while every disk has room.",
    )


class WorkerSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    worker = serializers.CharField()
    role = serializers.CharField()
    state = serializers.CharField()
    node = serializers.CharField(allow_null=True)
    attempts = serializers.IntegerField()
    processes = serializers.IntegerField(allow_null=True)
    units_done = serializers.IntegerField()
    units_claimed = serializers.IntegerField()
    peak_memory_gb = serializers.FloatField(allow_null=True)
    memory_limit_gb = serializers.FloatField(allow_null=True)
    oom_killed = serializers.BooleanField()
    exit_code = serializers.IntegerField(allow_null=True)
    error = serializers.CharField(allow_null=True)


class OutputFileSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="Relative to the run store.")
    task = serializers.CharField()
    size = serializers.IntegerField()
    modified = serializers.DateTimeField()


class OutputListingSerializer(serializers.Serializer):
    files = OutputFileSerializer(many=True)
    truncated = serializers.BooleanField(help_text="Whether the listing was cut (see `cut`).")
    cut = serializers.ChoiceField(
        choices=["files", "entries", "depth", "time"],
        allow_null=True,
        help_text=(
            "Why the listing stopped early: files (the most it lists), entries, depth or time "
            "(SIMRUN_LISTING_MAX_ENTRIES, SIMRUN_LISTING_MAX_DEPTH, SIMRUN_LISTING_MAX_S); "
            "null when it is whole."
        ),
    )


class LogEntrySerializer(serializers.Serializer):
    pod = serializers.CharField()
    attempt = serializers.IntegerField()
    text = serializers.CharField(allow_blank=True)
    ended = serializers.BooleanField()
    error = serializers.CharField(allow_null=True)
    truncated = serializers.BooleanField(help_text="Whether `text` was cut (see `cut`).")
    kept = serializers.BooleanField()
    cut = serializers.ChoiceField(
        choices=["log", "answer"],
        allow_null=True,
        help_text=(
            "Why `text` is not the whole log (or all the lines asked for): log (the most one "
            "log shows, 4 MiB) or answer (its share of SIMRUN_LOG_ANSWER_MAX_BYTES, the most "
            "an answer holds of all its logs, each from its end); null when it is whole."
        ),
    )
    start = serializers.IntegerField(
        help_text=(
            "Bytes before `text` that it leaves out: of the log from its start (with `tail`, "
            "of a live log's last lines as the backend gave them)."
        )
    )


class ServerEventSerializer(serializers.Serializer):
    """One server-sent event of a run's stream; `data` is JSON text."""

    event = serializers.ChoiceField(choices=["state", "progress", "end", "deleted"])
    id = serializers.CharField(required=False, help_text="<version>-<done>; resume after it.")
    data = serializers.CharField(help_text="JSON: the run's state, its counts, or its end.")  # type: ignore[assignment]

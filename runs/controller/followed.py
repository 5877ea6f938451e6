"""The runs the controller follows, as a tick reads them before it asks the backend.

Live runs and ended runs with work pending (`FOLLOWED`): one narrow row each (`Followed`),
and, for the runs the tick's process has not noted (`seen.py`), the rest of their rows in one
more query (`Unnoted`). A process reads every followed row once (`followed_rows`), then only
the rows written since its last read (`written_rows`: every write stamps `updated_at`, the
index `run_updated` finds them), so a tick's database read grows with what changed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import BooleanField, ExpressionWrapper, Q, TextField
from django.db.models.functions import Cast

from runs.models import Run, Task
from runs.states import RunState, TaskState

MANY_UNNOTED = 200  # more runs to read the rest of than this: read as the followed runs
FOLLOWED = (  # the runs the controller follows: live ones and ended ones with work pending
    Q(state__in=RunState.live())
    | Q(pending_release=True)
    | Q(pending_cancel=True)
    | Q(pending_logs=True)
    | Q(deleting=True)
)


class Followed(NamedTuple):
    """What a tick needs to know of every followed run before asking the backend."""

    pk: str
    version: int
    state: str
    workflow_name: str
    final_work: bool  # a final task's observations or logs are still to be kept


class Unnoted(NamedTuple):
    """What a tick needs to know besides of a run its process has not noted (seen.py)."""

    version: int  # the record's version when this was read
    updated_at: datetime  # when a reconcile last wrote the record
    derived_from: str  # `<version>:<digest>` of the status it was derived from (seen.py)
    merge_pending: dict[str, str]
    oom_kills: dict[str, list[int]]


@dataclass(frozen=True)
class Rows:
    """What a tick read of the runs' rows: every followed one (`whole`), or those written
    since the last read, with the ids of the runs written that are not followed any more."""

    followed: list[Followed]
    gone: list[str]
    whole: bool


def followed_rows() -> list[Followed]:
    """The followed runs in one query, without their tasks and JSON fields.

    Whether a run has final-task work is a lookup in one set of run ids, made once from the
    partial index `task_final_work` (a handful of tasks) rather than a search of each run's
    tasks: the query's cost stays a scan of the followed runs (and below the cost at which
    Postgres compiles a query, which took 200 ms a tick at 10,000 runs)."""
    rows = (
        Run.objects.filter(FOLLOWED)
        .order_by()
        .annotate(final_work=_final_work())
        .values_list(*Followed._fields)
    )
    return [Followed._make(row) for row in rows]


def written_rows(since: datetime) -> Rows:
    """The rows written at `since` or later (`updated_at`, which every write stamps), in one
    query on the index `run_updated`: those followed, and the ids of those that are not."""
    followed = ExpressionWrapper(FOLLOWED, output_field=BooleanField())
    rows = (
        Run.objects.filter(updated_at__gte=since)
        .order_by()
        .annotate(final_work=_final_work(), followed=followed)
        .values_list(*Followed._fields, "followed")
    )
    found: list[Followed] = []
    gone: list[str] = []
    for *row, is_followed in rows:
        if is_followed:
            found.append(Followed._make(row))
        else:
            gone.append(row[0])
    return Rows(found, gone, whole=False)


def _final_work() -> ExpressionWrapper:
    """Whether a run has a final task whose observations or logs are still to be kept."""
    work = Task.objects.filter(state__in=TaskState.final()).filter(
        Q(observed=False) | Q(logs_kept=False)
    )
    return ExpressionWrapper(Q(pk__in=work.values("run_id")), output_field=BooleanField())


def unnoted_rows(versions: Mapping[str, int]) -> dict[str, Unnoted]:
    """The rest of the rows of the runs in `versions` (id → the version a tick read), by id,
    in one query (none for no run); a run written since (another version) is left out. Only
    a run its tick has not noted needs these, its JSON fields decoded: at a steady tick, none;
    at the first tick of a process, every one (then selected as followed, not by their ids)."""
    if not versions:
        return {}
    runs = Run.objects.filter(FOLLOWED)
    if len(versions) <= MANY_UNNOTED:
        runs = Run.objects.filter(pk__in=list(versions))
    rows = (
        runs.order_by()
        .annotate(
            pending_text=Cast("merge_pending", TextField()),
            kills_text=Cast("oom_kills", TextField()),
        )
        .values_list("pk", "version", "updated_at", "derived_from", "pending_text", "kills_text")
    )
    return {
        pk: Unnoted(version, updated_at, noted, _decoded(pending), _decoded(kills))
        for pk, version, updated_at, noted, pending, kills in rows
        if versions.get(pk) == version
    }


def _decoded(text: str) -> Any:
    """A JSON field read as its text: decoded, but for the empty object most rows hold."""
    return {} if text == "{}" else json.loads(text)

"""The list of runs and one run, as the API and the pages show them (S7).

Keyset pagination on (created_at, id), newest first, so a page costs the same with 100 or
100,000 runs; the number of queries per page is fixed (the runs with their identities, the
tasks of the live ones, and the owner named in a filter). The progress of a live run comes
from its task rows and its ledgers (`runs.selectors.progress`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Prefetch, Q, QuerySet

from runs.models import Identity, Run, Task
from runs.refusals import RunNotFound
from runs.selectors.progress import TaskProgress, progress_of, run_progress
from runs.states import RunState
from runs.store import task_paths
from simrun_harness.ledger_reads import counts

LISTED_FIELDS = (
    "id",
    "name",
    "state",
    "message",
    "tier",
    "group",
    "created_at",
    "submitted_at",
    "started_at",
    "ended_at",
    "pending_cancel",
    "pending_release",
    "pending_logs",
    "deleting",
    "owner__name",
    "principal__name",
)
"""What a list entry shows: the large JSON fields of a run are not read for a list."""
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
LIVE, ENDED = "live", "ended"


class BadFilter(ValueError):
    """A filter or cursor that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class RunItem:
    """A run of the list: its summary, owner, workflow name and progress (None once ended).

    `owner` is whose run it counts as (an agent's person); `submitted_by` is the identity whose
    token submitted it.
    """

    id: str
    name: str
    state: str
    message: str
    owner: str
    submitted_by: str
    tier: str
    group: str
    progress: float | None
    created_at: datetime
    submitted_at: datetime | None
    started_at: datetime | None
    ended_at: datetime | None
    pending: str = ""
    """"cancelling" or "deleting" while a worker does what the request left it (`Run.pending`)."""


@dataclass(frozen=True)
class RunPage:
    runs: list[RunItem]
    next_cursor: str | None


def run_item(run: Run) -> RunItem:
    """The list entry of a run (its owner, principal and tasks should be loaded with it)."""
    return _item(run, progress_of(run))


def _item(run: Run, progress: float | None) -> RunItem:
    return RunItem(
        id=run.id,
        name=run.name,
        state=run.state,
        message=run.message,
        owner=run.principal.name,
        submitted_by=run.owner.name,
        tier=run.tier,
        group=run.group,
        progress=progress,
        created_at=run.created_at,
        submitted_at=run.submitted_at,
        started_at=run.started_at,
        ended_at=run.ended_at,
        pending=run.pending,
    )


def runs_with_details() -> QuerySet[Run]:
    """Runs with their identities and tasks loaded in a fixed number of queries."""
    return Run.objects.select_related("owner", "principal").prefetch_related(
        Prefetch("tasks", queryset=Task.objects.order_by("position"))
    )


def run_names(run_ids: list[str]) -> dict[str, str]:
    """The workflow name of each of these runs that has a record."""
    return dict(Run.objects.filter(pk__in=run_ids).values_list("id", "name"))


def get_run(run_id: str) -> Run:
    """One run with its identities and tasks; RunNotFound for an unknown id."""
    run = runs_with_details().filter(pk=run_id).first()
    if run is None:
        raise RunNotFound(f"no run {run_id!r}")
    return run


def states_of(value: str | None) -> list[str] | None:
    """The states a filter names: a comma list of run states, or `live` / `ended`."""
    if not value:
        return None
    states: list[str] = []
    for part in value.split(","):
        if part == LIVE:
            states.extend(RunState.live())
        elif part == ENDED:
            states.extend(RunState.ended())
        elif part in set(RunState):
            states.append(part)
        else:
            allowed = ", ".join([*RunState, LIVE, ENDED])
            raise BadFilter(f"state: unknown state {part!r} (allowed: {allowed})")
    return states


CURSOR = r"^[0-9]{1,16}-[a-z0-9]{1,24}$"
"""A cursor: the microseconds since 1970 of a run's creation and its id. Any text of this
shape is a position in the list (the OpenAPI document says so), so none is refused."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def encode_cursor(run: Run) -> str:
    return cursor_at(created_at=run.created_at, run_id=run.id)


def cursor_at(*, created_at: datetime, run_id: str) -> str:
    """The cursor of the position of a run created at `created_at` with id `run_id`."""
    return f"{(created_at - _EPOCH) // _MICROSECOND}-{run_id}"


NOTHING_SHOWN = "0-0"
"""The cursor a list that shows no run watches from: every run is newer."""


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The (created_at, id) a cursor points after; BadFilter when it is not one of ours."""
    if not re.fullmatch(CURSOR, cursor):
        raise BadFilter("cursor: not a cursor of this list (use next_cursor as given)")
    micros, _, run_id = cursor.partition("-")
    return _EPOCH + int(micros) * _MICROSECOND, run_id


def list_runs(
    *,
    state: str | None = None,
    group: str | None = None,
    owner: str | None = None,
    cursor: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> RunPage:
    """A page of runs, newest first.

    Args:
        state: A comma list of states, or `live` / `ended`.
        group: Only runs of this group ("" is not a filter).
        owner: Runs that count as this identity's (its own and its agents'), or that this
            identity submitted.
        cursor: The `next_cursor` of the page before.
        limit: Runs per page, 1 to MAX_LIMIT.

    Raises:
        BadFilter: An unknown state, a limit out of range or a foreign cursor.
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise BadFilter(f"limit: must be between 1 and {MAX_LIMIT}")
    runs: QuerySet[Run] = (
        Run.objects.select_related("owner", "principal")
        .only(*LISTED_FIELDS)
        .order_by("-created_at", "-id")
    )
    runs = narrowed(runs, state=state, group=group, owner=owner)
    if cursor:
        created, run_id = decode_cursor(cursor)
        runs = runs.filter(Q(created_at__lt=created) | Q(created_at=created, id__lt=run_id))
    found = list(runs[: limit + 1])
    more = len(found) > limit
    found = found[:limit]
    progress = live_progress([r.id for r in found if not r.ended])
    return RunPage(
        runs=[_item(r, progress.get(r.id)) for r in found],
        next_cursor=encode_cursor(found[-1]) if more and found else None,
    )


def narrowed(
    runs: QuerySet[Run], *, state: str | None, group: str | None, owner: str | None
) -> QuerySet[Run]:
    """`runs` narrowed by the list's filters (see `list_runs`); BadFilter for a bad state."""
    states = states_of(state)
    if states:
        runs = runs.filter(state__in=states)
    if group:
        runs = runs.filter(group=group)
    if owner:
        ids = list(Identity.objects.filter(name=owner).values_list("pk", flat=True))
        runs = runs.filter(Q(principal_id__in=ids) | Q(owner_id__in=ids))
    return runs


def text_query(text: str) -> Q:
    """Runs whose id, workflow name, group or message contain `text` (the pages' search)."""
    return (
        Q(id__icontains=text)
        | Q(name__icontains=text)
        | Q(group__icontains=text)
        | Q(message__icontains=text)
    )


def newer_runs(
    *,
    after: str,
    text: str | None = None,
    state: str | None = None,
    group: str | None = None,
    owner: str | None = None,
) -> int:
    """How many runs matching the filters (and `text`) come before the cursor `after` in the
    list, newest first: the runs submitted since a list was shown. BadFilter as `list_runs`."""
    created, run_id = decode_cursor(after)
    runs = narrowed(Run.objects.all(), state=state, group=group, owner=owner)
    if text:
        runs = runs.filter(text_query(text))
    return runs.filter(Q(created_at__gt=created) | Q(created_at=created, id__gt=run_id)).count()


def live_progress(run_ids: list[str]) -> dict[str, float]:
    """S7: the progress of live runs, from their tasks (one query) and their ledgers."""
    if not run_ids:
        return {}
    by_run: dict[str, list[TaskProgress]] = {r: [] for r in run_ids}
    tasks = Task.objects.filter(run_id__in=run_ids).only("run_id", "task_id", "state", "splittable")
    for task in tasks:
        ledger = counts(task_paths(task.run_id, task.task_id)) if task.splittable else None
        by_run[task.run_id].append(TaskProgress(task.task_id, task.state, ledger, None, None))
    return {run_id: run_progress(progress) for run_id, progress in by_run.items()}

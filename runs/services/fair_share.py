"""Fair share of submissions between identities: one identity's flood cannot starve another's.

Three rules, each held in the rows (no process keeps a queue in memory):

- **Admission** (`admit_submission`): an identity may have SIMRUN_SUBMIT_MAX_PENDING runs in
  submission and make SIMRUN_SUBMITS_PER_MINUTE submissions a minute; beyond, the submission
  is refused with the seconds to wait (429 with Retry-After in the API).
- **Turns** (`claim_next_submission`): a Celery message `submit_run(<run>)` is a turn of a
  worker, not a place in a line. The worker takes the waiting submission of the identity with
  the fewest submissions in progress, then of the one whose last turn came longest ago, its
  oldest run first; the message's own run waits its identity's turn. With Celery and kombu as
  they are, a queue is first in, first out (Redis lists by LPUSH and BRPOP, the file broker's
  files in order), and a worker reserves one unacknowledged message per process (a prefetch
  multiplier of 1 with late acknowledgement), so a flood's messages wait in the broker ahead
  of anyone else's, and whichever a worker gets next must not decide whose run goes.
  kombu's Redis transport does take turns between queues (`queue_order_strategy`
  round_robin), but a queue per identity would need every worker to consume queues made at
  run time (`add_consumer` broadcasts) and holds nothing for the file broker of the embedded
  default. Deciding in the database, when a worker is free, is fair on every broker.
- **Re-queues** (`requeue_submissions`): a run left waiting (no worker took it within
  SIMRUN_SUBMIT_LEASE_S, or its worker's lease ran out) gets one more message per back-off
  step (the lease time, doubling, at most MAX_REQUEUE_WAIT_S), noted in its row by a
  conditional update, so two controllers (beat's pass and the watcher's) send one between
  them, and no pass sends one for a run whose step has not passed (each pass sent one: 12,611
  messages in the broker after a flood of 500).

A submission that must build its model's environment builds one at a time per identity and
gives its run back otherwise, its worker free for the next turn: runs/services/builds.py.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Count, F, Min, Q
from django.utils import timezone

from runs.models import Identity, Run
from runs.refusals import SubmissionThrottled
from runs.services import background
from runs.services.builds import builds_in_progress, must_wait
from runs.states import RunState

log = logging.getLogger(__name__)

MINUTE = timedelta(minutes=1)
MAX_REQUEUE_WAIT_S = 600.0
PENDING_RETRY_AFTER_S = 10  # a submission takes seconds: try again after a few of them
CLAIM_TRIES = 5  # picks tried when other workers take the picked run first


def lease() -> timedelta:
    return timedelta(seconds=settings.SIMRUN_SUBMIT_LEASE_S)


# --- admission ------------------------------------------------------------------------------


def admit_submission(*, identity: Identity, lock: bool = True) -> None:
    """SubmissionThrottled when `identity` holds as many runs in submission as it may, or made
    as many submissions in the last minute. With `lock` (inside the transaction that records
    the run) the identity's row is locked first, so two requests of one identity cannot both
    take its last place."""
    if lock:
        Identity.objects.select_for_update().filter(pk=identity.pk).first()
    now = timezone.now()
    pending_limit = int(settings.SIMRUN_SUBMIT_MAX_PENDING)
    pending = Run.objects.filter(owner=identity, state=RunState.SUBMITTING).count()
    if pending >= pending_limit:
        raise SubmissionThrottled(
            f"{identity.name} has {pending} runs waiting to be submitted, the most one "
            f"identity may have (SIMRUN_SUBMIT_MAX_PENDING={pending_limit}); submit again "
            "once some of them are queued",
            retry_after_s=PENDING_RETRY_AFTER_S,
        )
    rate_limit = int(settings.SIMRUN_SUBMITS_PER_MINUTE)
    recent = Run.objects.filter(owner=identity, created_at__gt=now - MINUTE)
    found = recent.aggregate(count=Count("pk"), oldest=Min("created_at"))
    if found["count"] >= rate_limit:
        wait = math.ceil((found["oldest"] + MINUTE - now).total_seconds())
        raise SubmissionThrottled(
            f"{identity.name} submitted {found['count']} runs in the last minute, the most "
            f"one identity may (SIMRUN_SUBMITS_PER_MINUTE={rate_limit}); submit again in "
            f"{max(1, wait)} s",
            retry_after_s=max(1, wait),
        )


# --- turns ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Waiting:
    """A run in submission that no worker holds."""

    run_id: str
    owner_id: int
    created_at: datetime


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def fairest(
    waiting: Iterable[Waiting],
    *,
    in_progress: dict[int, int],
    turns: dict[int, datetime | None],
) -> Waiting | None:
    """The waiting submission to take next: of the identity with the fewest submissions in
    progress, then of the one whose last turn came longest ago (never first), then of the one
    waiting longest; that identity's oldest run."""
    oldest: dict[int, Waiting] = {}
    for run in waiting:
        found = oldest.get(run.owner_id)
        if found is None or (run.created_at, run.run_id) < (found.created_at, found.run_id):
            oldest[run.owner_id] = run
    if not oldest:
        return None

    def order(owner: int) -> tuple[int, datetime, datetime, str]:
        first = oldest[owner]
        turn = turns.get(owner) or EPOCH
        return in_progress.get(owner, 0), turn, first.created_at, first.run_id

    return oldest[min(oldest, key=order)]


def _unleased(now: datetime) -> Q:
    return Q(submit_lease_until__isnull=True) | Q(submit_lease_until__lt=now)


def next_submission(*, now: datetime) -> Waiting | None:
    """The waiting submission a free worker should take now (`fairest`, from the rows); a run
    given back for a build that still has to wait is passed over (runs/services/builds.py)."""
    submitting = Run.objects.filter(state=RunState.SUBMITTING)
    building = builds_in_progress(now=now)
    fields = ("pk", "owner_id", "created_at", "submit_build_waits")
    waiting = [
        Waiting(pk, owner, created)
        for pk, owner, created, waits_for in submitting.filter(_unleased(now)).values_list(*fields)
        if not must_wait(owner_id=owner, waits_for=waits_for, building=building)
    ]
    if not waiting:
        return None
    held = submitting.filter(submit_lease_until__gte=now).values("owner_id")
    in_progress = {row["owner_id"]: row["n"] for row in held.annotate(n=Count("pk"))}
    owners = {w.owner_id for w in waiting}
    turns = dict(Identity.objects.filter(pk__in=owners).values_list("pk", "submission_turn_at"))
    return fairest(waiting, in_progress=in_progress, turns=turns)


def claim_next_submission() -> str | None:
    """Take the submission lease of the fairest waiting run and note its identity's turn;
    its id, or None when no run waits (or other workers took each one picked)."""
    for _ in range(CLAIM_TRIES):
        now = timezone.now()
        picked = next_submission(now=now)
        if picked is None:
            return None
        taken = (
            Run.objects.filter(pk=picked.run_id, state=RunState.SUBMITTING)
            .filter(_unleased(now))
            .update(
                submit_lease_until=now + lease(),
                submit_building="",  # a dead worker's: this worker looks again
                submit_build_waits="",
                version=F("version") + 1,
            )
        )
        if taken:
            Identity.objects.filter(pk=picked.owner_id).update(submission_turn_at=now)
            return picked.run_id
    return None


# --- re-queues ------------------------------------------------------------------------------


def requeue_wait(requeues: int) -> timedelta:
    """How long a waiting run waits after its last message before it gets another."""
    seconds = settings.SIMRUN_SUBMIT_LEASE_S * 2 ** min(requeues, 20)
    return timedelta(seconds=min(seconds, MAX_REQUEUE_WAIT_S))


def requeue_due(
    *,
    now: datetime,
    created_at: datetime,
    queued_at: datetime | None,
    requeues: int,
    lease_until: datetime | None,
) -> bool:
    """Whether a run in submission gets one more message now: no worker holds it, and its
    back-off step passed since its last message (its creation, for a row that has none)."""
    if lease_until is not None and lease_until >= now:
        return False  # a worker is at it
    return (queued_at or created_at) + requeue_wait(requeues) <= now


def stale_submissions() -> list[str]:
    """C17: the runs in submission due for another message: their worker gone (its lease ran
    out) or never come, and their back-off step passed."""
    now = timezone.now()
    rows = Run.objects.filter(state=RunState.SUBMITTING).filter(
        Q(submit_lease_until__lt=now)
        | Q(submit_lease_until__isnull=True, created_at__lt=now - lease())
    )
    fields = ("pk", "created_at", "submit_queued_at", "submit_requeues", "submit_lease_until")
    return [
        pk
        for pk, created, queued, requeues, lease_until in rows.values_list(*fields)
        if requeue_due(
            now=now,
            created_at=created,
            queued_at=queued,
            requeues=requeues,
            lease_until=lease_until,
        )
    ]


def requeue_submissions() -> list[str]:
    """Send one more `submit_run` for each run due (`stale_submissions`), noting it in its row
    first by a conditional update: of two controllers passing at once one sends it."""
    sent = []
    for run_id in stale_submissions():
        row = Run.objects.filter(pk=run_id).values("submit_queued_at", "submit_requeues").first()
        if row is None:
            continue
        noted = Run.objects.filter(
            pk=run_id,
            state=RunState.SUBMITTING,
            submit_queued_at=row["submit_queued_at"],
            submit_requeues=row["submit_requeues"],
        ).update(submit_queued_at=timezone.now(), submit_requeues=F("submit_requeues") + 1)
        if noted:
            background.enqueue(background.SUBMIT_RUN, run_id=run_id)
            sent.append(run_id)
    if sent:
        log.info("sent %d waiting submissions again", len(sent))
    return sent

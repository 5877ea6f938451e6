"""Environment builds shared between identities: one identity's models cannot hold every worker.

A submission whose model environment is not built yet builds it in its worker: tens of
seconds here, minutes on a cluster. Unchecked, an identity submitting several models that
each need a build holds every worker (`simrun serve` starts two) and another identity's
submission waits a build's length. So, each held in the rows:

- **One build per identity** (`start_build`): an identity's submissions build
  SIMRUN_BUILDS_PER_IDENTITY environments at a time, and an environment is built by one
  submission at a time, whoever's. A build in progress is a run in submission whose
  `submit_building` names the environment and whose submission lease is alive (renewed while
  its worker builds): a worker that dies holds no one once its lease runs out.
- **Given back** (`start_build` False): a submission that would build beyond lets its lease go
  and notes the environment it waits for in `submit_build_waits`; its worker takes the next
  fairest run (`claim_next_submission` passes over a run whose build still has to wait:
  `must_wait`), so it is free again in the time of a look at the rows, not of a build.
- **Sent again** (`end_build`): as a build ends, each run given back to its identity or for
  its environment gets a message, once the end commits: taken again at once, not after the
  controller's back-off. The runs a dead worker's build held are sent by the controller
  (fair_share.requeue_submissions), its lease run out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from runs.models import Run
from runs.services import background
from runs.states import RunState

log = logging.getLogger(__name__)

BUILD_LOCK = 0x73696D72756E62  # PostgreSQL's advisory lock of the decisions to build


@dataclass(frozen=True)
class Build:
    """An environment build in progress: the run whose worker builds it, and whose it is."""

    run_id: str
    owner_id: int
    ref: str


def builds_in_progress(*, now: datetime) -> list[Build]:
    """The builds of runs in submission whose worker still holds them (its lease alive)."""
    rows = (
        Run.objects.filter(state=RunState.SUBMITTING, submit_lease_until__gte=now)
        .exclude(submit_building="")
        .values_list("pk", "owner_id", "submit_building")
    )
    return [Build(pk, owner, ref) for pk, owner, ref in rows]


def may_build(*, owner_id: int, ref: str, building: Iterable[Build]) -> bool:
    """Whether an identity's submission may start building `ref` now: nobody builds `ref`,
    and the identity builds fewer than SIMRUN_BUILDS_PER_IDENTITY environments."""
    limit = int(settings.SIMRUN_BUILDS_PER_IDENTITY)
    own = 0
    for build in building:
        if build.ref == ref:
            return False
        if build.owner_id == owner_id:
            own += 1
    return own < limit


def must_wait(*, owner_id: int, waits_for: str, building: Iterable[Build]) -> bool:
    """Whether a run given back for a build (`waits_for`, '' for none) is still to wait."""
    return bool(waits_for) and not may_build(owner_id=owner_id, ref=waits_for, building=building)


def _decided_alone() -> None:
    """Hold the decisions to build for the rest of the transaction. Two workers checking at
    once would each find no build of their identity (or of the environment) and both start
    one; and a build ending while a run is given back would message the runs waiting before
    that run is one of them, leaving it to the controller's back-off. The second to come
    waits here and reads what the first wrote. PostgreSQL: an advisory lock held to the end
    of the transaction; SQLite: its transactions begin IMMEDIATE (simrun_site/env.py), each
    holding the database's one write lock."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [BUILD_LOCK])


def start_build(*, run_id: str, ref: str) -> bool:
    """Mark the run's submission as building `ref` when it may (`may_build`): True. Else give
    the run back (its lease let go, `ref` noted as what it waits for; in submission as before)
    for `end_build` to send again: False; False too for a run no longer in submission (its
    owner cancelled it). The caller holds the run's submission lease."""
    with transaction.atomic():
        _decided_alone()
        owner_id = Run.objects.filter(pk=run_id).values_list("owner_id", flat=True).get()
        building = [b for b in builds_in_progress(now=timezone.now()) if b.run_id != run_id]
        mine = Run.objects.filter(pk=run_id, state=RunState.SUBMITTING)
        if may_build(owner_id=owner_id, ref=ref, building=building):
            # 0 rows: the run was cancelled meanwhile, and nothing is built for it
            return mine.update(submit_building=ref, submit_build_waits="") == 1
        mine.update(submit_lease_until=None, submit_building="", submit_build_waits=ref)
    log.info("run %s waits for a build in progress to build %s", run_id, ref)
    return False


def end_build(*, run_id: str, ref: str) -> list[str]:
    """The build of `ref` by the run's submission ended (built or not): its mark cleared, and
    each run given back to its identity or for `ref` sent again once this commits; their ids."""
    with transaction.atomic():
        _decided_alone()
        owner_id = Run.objects.filter(pk=run_id).values_list("owner_id", flat=True).get()
        Run.objects.filter(pk=run_id).update(submit_building="")
        now = timezone.now()
        waiting = (
            Run.objects.filter(state=RunState.SUBMITTING)
            .exclude(submit_build_waits="")
            .filter(Q(owner_id=owner_id) | Q(submit_build_waits=ref))
            .filter(Q(submit_lease_until__isnull=True) | Q(submit_lease_until__lt=now))
        )
        sent = list(waiting.values_list("pk", flat=True))
        for waiter in sent:
            background.enqueue_on_commit(background.SUBMIT_RUN, run_id=waiter)
    return sent

"""A tick looks only at what changed: the rows written since its last read and the runs whose
status the backend says changed (its loop's list of changes); the runs it derives are written
in a few statements, each only if its row did not move meanwhile. With the real local backend
and its loop, and real rows."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from pytest_django import Settings

from cluster.local.backend import LocalBackend
from runs.controller import tick as tick_module
from runs.controller.seen import Seen
from runs.controller.tick import tick
from runs.models import Run, Task
from runs.ports import BackendStatus, WorkflowPhase
from tests.cluster.local.builders import command_task, shape
from tests.runs.controller.test_tick import launched
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db

HUGE = shape(cores=64)  # more than the backend has: its pod waits and its status stays
STEADY_QUERIES = 3  # stale submissions, the rows written since, the heartbeat


class Asked(LocalBackend):
    """The local backend, noting the workflows whose statuses each tick asks for."""

    asked: list[set[str]]

    def statuses(
        self, names: Collection[str], *, may_reuse: Collection[str] = ()
    ) -> dict[str, BackendStatus | None]:
        self.asked.append(set(names))
        return super().statuses(names, may_reuse=may_reuse)


@pytest.fixture
def backend(store: Path) -> Iterator[Asked]:
    """The backend as the watcher has it: its loop passes (every 50 ms) and rings."""
    made = Asked(store, cores=2, memory_gb=2, poll_s=0.05)
    made.asked = []
    made.subscribe(lambda: None)
    yield made
    made.close()


def next_pass(backend: LocalBackend) -> None:
    """Wait for a whole pass of the loop that begins after this call."""
    count = [0]
    one_pass = backend._loop._pass

    def counted() -> Any:
        count[0] += 1
        return one_pass()

    backend._loop._pass = counted
    try:
        wait_for(lambda: count[0] >= 2, what="a whole pass of the loop")
    finally:
        backend._loop._pass = one_pass


def settled(backend: Asked, count: int) -> tuple[list[Run], Seen]:
    """`count` runs whose pods wait, derived by a process that ticked twice since."""
    runs = [launched(backend, command_task("hello", "pass", pod=HUGE)) for _ in range(count)]
    next_pass(backend)
    seen = Seen()
    tick(backend, seen=seen)
    tick(backend, seen=seen)
    backend.asked.clear()
    return runs, seen


def steady(backend: Asked, seen: Seen) -> tuple[int, list[set[str]]]:
    """A tick's queries and the statuses it asked for."""
    backend.asked.clear()
    with CaptureQueriesContext(connection) as made:
        tick(backend, seen=seen)
    return len(made), list(backend.asked)


def test_a_steady_tick_reads_no_status_and_makes_the_same_queries_at_n_and_2n_runs(
    backend: Asked,
) -> None:
    _, seen = settled(backend, 2)
    at_n = steady(backend, seen)
    _, seen = settled(backend, 2)
    next_pass(backend)
    tick(backend, seen=seen)

    at_2n = steady(backend, seen)

    assert at_n == at_2n == (STEADY_QUERIES, [])


def test_a_run_whose_status_changed_is_the_only_one_read_and_derived(
    backend: Asked,
) -> None:
    """The loop's list of changes names it: the quiet run's status is not asked for."""
    [node] = backend.nodes()
    backend.reserve(node.name, "elsewhere")  # nothing of these runs starts meanwhile
    [quiet], seen = settled(backend, 1)
    moving = launched(backend, command_task("hello", "pass"))
    tick(backend, seen=seen)
    backend.unreserve(node.name, "elsewhere")
    wait_for(
        lambda: backend.status(moving.workflow_name).phase is WorkflowPhase.SUCCEEDED,
        what="the moving run's pod succeeded",
    )
    next_pass(backend)
    quiet_version = Run.objects.get(pk=quiet.pk).version

    _, asked = steady(backend, seen)

    assert asked == [{moving.workflow_name}]
    assert Run.objects.get(pk=moving.pk).state == "succeeded"
    assert Run.objects.get(pk=quiet.pk).version == quiet_version


def test_a_run_another_writer_wrote_is_derived_at_the_next_tick(backend: Asked) -> None:
    """Its row was written since the tick's last read: looked at, its status read again, and
    derived (its pods restored); the other run is not looked at."""
    (run, _), seen = settled(backend, 2)
    Run.objects.filter(pk=run.pk).update(pods={}, version=F("version") + 1)

    _, asked = steady(backend, seen)

    assert asked == [{run.workflow_name}]
    assert Run.objects.get(pk=run.pk).pods["hello"]["phase"] == "queued"


def hidden_write(run: Run, seen: Seen, earlier: timedelta) -> None:
    """Another writer's change stamped `earlier` than the tick's last read: a transaction
    that stamped its rows and committed after the read."""
    assert seen.read_at is not None
    Run.objects.filter(pk=run.pk).update(
        pods={}, version=F("version") + 1, updated_at=seen.read_at - earlier
    )


def pods_of(run: Run) -> dict[str, Any]:
    return Run.objects.get(pk=run.pk).pods


def test_a_write_stamped_before_the_last_read_within_the_lag_is_read(
    backend: Asked, settings: Settings
) -> None:
    settings.SIMRUN_TICK_LAG_S = 10.0
    [run], seen = settled(backend, 1)
    hidden_write(run, seen, timedelta(seconds=9))

    tick(backend, seen=seen)

    assert pods_of(run)["hello"]["phase"] == "queued"


def test_a_write_stamped_before_the_lag_is_read_at_the_next_whole_read(
    backend: Asked, settings: Settings
) -> None:
    """What the lag cannot cover (a transaction longer than it, clocks apart by more) waits
    for the next read of every followed row, every `SIMRUN_TICK_RESYNC_S`."""
    settings.SIMRUN_TICK_LAG_S = 10.0
    [run], seen = settled(backend, 1)
    hidden_write(run, seen, timedelta(seconds=11))

    tick(backend, seen=seen)
    assert pods_of(run) == {}
    settings.SIMRUN_TICK_RESYNC_S = 0.0
    tick(backend, seen=seen)

    assert pods_of(run)["hello"]["phase"] == "queued"


def test_a_tick_deriving_every_run_makes_the_same_queries_at_n_and_2n_runs(
    store: Path,
) -> None:
    """The runs derived are fetched in two queries and written in one transaction of a few
    statements (runs/controller/writes.py), whatever their number."""
    backend = LocalBackend(store, cores=2, memory_gb=2)

    def first_tick(count: int) -> int:
        for _ in range(count):
            launched(backend, command_task("hello", "pass", pod=HUGE))
        versions = dict(Run.objects.values_list("pk", "version"))
        with CaptureQueriesContext(connection) as made:
            tick(backend, seen=Seen())
        assert all(v > versions[pk] for pk, v in Run.objects.values_list("pk", "version"))
        return len(made)

    tick(backend, seen=Seen())  # its heartbeat's row made
    at_n = first_tick(2)
    Run.objects.update(pods={}, derived_from="", version=F("version") + 1)

    assert first_tick(2) == at_n  # 4 runs now, every one derived and written


def test_a_run_cancelled_between_its_status_read_and_the_write_keeps_its_cancel(
    backend: Asked, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C22: in a tick's batch the cancel wins, the other run of the batch is written, and
    the cancelled run is derived again (not noted as written)."""
    cancelled, other = (launched(backend, command_task("hello", "pass", pod=HUGE)) for _ in "ab")
    next_pass(backend)
    real: Callable[..., set[str]] = tick_module.write_if_unchanged

    def cancel_first(writes: Any) -> set[str]:
        Run.objects.filter(pk=cancelled.pk).update(
            state="cancelled", message="cancelled by paul", version=F("version") + 1
        )
        Task.objects.filter(run=cancelled).update(state="cancelled")
        return real(writes)

    monkeypatch.setattr(tick_module, "write_if_unchanged", cancel_first)
    seen = Seen()

    tick(backend, seen=seen)

    kept = Run.objects.get(pk=cancelled.pk)
    assert (kept.state, kept.message, kept.pods) == ("cancelled", "cancelled by paul", {})
    assert Task.objects.get(run=kept).state == "cancelled"
    assert Run.objects.get(pk=other.pk).pods["hello"]["phase"] == "queued"
    assert cancelled.pk in seen.dirty and other.pk not in seen.dirty

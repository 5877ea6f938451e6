"""The first tick of a restarted controller: in a constant number of
queries, with no read of a run's status files when its loop read them after the record's last
write; a run whose row says it was derived from the status read now is neither fetched nor
derived, and one derived reads the store only where the status says something depends on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db.models import F
from django.utils import timezone

from cluster.local.backend import LocalBackend
from runs.controller import reconcile, store_facts
from runs.controller.seen import Seen
from runs.controller.tick import tick
from runs.models import Run
from tests.cluster.local.builders import shape, split_task
from tests.runs.controller.test_tick import launched
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db

HUGE = shape(cores=64)  # more than the backend has: the pods wait and the statuses stay
# stale submissions, followed runs, the rest of the rows of the runs this process has not
# noted, the heartbeat: no run fetched
FIRST_TICK_QUERIES = 4
DERIVING_QUERIES = 6  # and the runs derived, with their tasks


@pytest.fixture
def backend(store: Path) -> Iterator[LocalBackend]:
    made = LocalBackend(store, cores=2, memory_gb=2, poll_s=0.05)
    yield made
    made.close()


def waiting_runs(backend: LocalBackend, count: int) -> list[Run]:
    """Runs of a split task (coordinator merging, an extra worker) whose pods wait."""
    return [
        launched(backend, split_task("scan", 2, pod=HUGE, coordinator_merges=True))
        for _ in range(count)
    ]


def passes_after(backend: LocalBackend) -> Callable[[], None]:
    """A wait for the loop's next whole pass (one that begins after this call)."""
    count = [0]
    one_pass = backend._loop._pass

    def counted() -> Any:
        count[0] += 1
        return one_pass()

    backend._loop._pass = counted
    return lambda: wait_for(lambda: count[0] >= 2, what="a whole pass of the loop")


@pytest.fixture
def store_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The store reads of the derivation (merge markers, reports), as they are made."""
    made: list[str] = []
    for module, name in ((reconcile, "has_merge_marker"), (store_facts, "reports")):
        real = getattr(module, name)

        def counting(*args: Any, _real: Any = real, _name: str = name) -> Any:
            made.append(_name)
            return _real(*args)

        monkeypatch.setattr(module, name, counting)
    return made


def restarted_first_tick(
    backend: LocalBackend, at_most: Any, queries: int = FIRST_TICK_QUERIES
) -> tuple[int, int]:
    """The runs derived by a process before (their records written), a pass of the loop,
    then the first tick of a new process (`at_most`: django_assert_max_num_queries): its
    queries and its reads of status files."""
    tick(backend, seen=Seen())
    passes_after(backend)()
    reads = backend._statuses.reads
    with at_most(queries) as made:
        tick(backend, seen=Seen())
    return len(made), backend._statuses.reads - reads


def test_the_first_tick_after_a_restart_costs_the_same_queries_at_n_and_2n_runs(
    backend: LocalBackend, store_reads: list[str], django_assert_max_num_queries: Any
) -> None:
    """Every run derived (none changed): the queries do not grow with the runs, no status is
    read from the files (the loop's pass read them after the records were written), and the
    store is not read (no coordinator ended, no attempt failed)."""
    backend.subscribe(lambda: None)
    waiting_runs(backend, 2)
    at_n = restarted_first_tick(backend, django_assert_max_num_queries)
    assert {r.pods["scan-w0"]["phase"] for r in Run.objects.all()} == {"queued"}
    waiting_runs(backend, 2)

    at_2n = restarted_first_tick(backend, django_assert_max_num_queries)

    assert at_n == at_2n == (FIRST_TICK_QUERIES, 0)
    assert store_reads == []


def test_a_record_written_after_the_loops_last_pass_is_derived_from_its_files(
    backend: LocalBackend,
) -> None:
    """C22 across processes: what the loop read before another process wrote the record may
    be older than what that process derived it from, so it is read again."""
    backend.subscribe(lambda: None)
    [run] = waiting_runs(backend, 1)
    tick(backend, seen=Seen())
    passes_after(backend)()
    # another process writes the record; a minute ahead, no pass of the loop (every 50 ms)
    # can begin after it before the tick
    later = timezone.now() + timedelta(minutes=1)
    Run.objects.filter(pk=run.pk).update(pods={}, updated_at=later, version=F("version") + 1)
    reads = backend._statuses.reads

    tick(backend, seen=Seen())

    assert backend._statuses.reads - reads == 1
    assert Run.objects.get(pk=run.pk).pods["scan-w0"]["phase"] == "queued"


def test_runs_whose_rows_note_no_status_are_derived_once_and_noted_without_a_new_version(
    backend: LocalBackend, store_reads: list[str], django_assert_max_num_queries: Any
) -> None:
    """Rows of an older controller (no `derived_from`): every run derived, in a constant number
    of queries plus one conditional update a run noting its status, no version bumped; the
    next restart derives none."""
    backend.subscribe(lambda: None)
    waiting_runs(backend, 3)
    tick(backend, seen=Seen())
    Run.objects.update(derived_from="")
    versions = dict(Run.objects.values_list("pk", "version"))
    passes_after(backend)()

    with django_assert_max_num_queries(DERIVING_QUERIES + 3):
        tick(backend, seen=Seen())

    assert dict(Run.objects.values_list("pk", "version")) == versions
    assert all(Run.objects.values_list("derived_from", flat=True))
    assert restarted_first_tick(backend, django_assert_max_num_queries) == (FIRST_TICK_QUERIES, 0)
    assert store_reads == []


def test_a_restarted_process_notes_the_runs_whose_rows_say_they_are_derived(
    backend: LocalBackend,
) -> None:
    """Noted from their rows as if derived here (gap found by mutation testing): the first
    tick after a restart leaves every run noted, so the next derives none."""
    backend.subscribe(lambda: None)
    waiting_runs(backend, 2)
    tick(backend, seen=Seen())
    passes_after(backend)()
    seen = Seen()

    tick(backend, seen=seen)

    assert len(seen) == 2

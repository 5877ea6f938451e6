"""The local backend's list of changes (`RunStatuses.changes`, `LocalBackend.changes`): the
workflows whose status a pass of the loop found changed since a mark, so that a controller's
tick reads only those; and "cannot say" whenever the list could have missed one. The runs are
files written by hand, their passes made by the test (`test_statuses_cache.py`)."""

from __future__ import annotations

import time
from pathlib import Path

from cluster.local import statuses as statuses_module
from cluster.local.backend import LocalBackend
from cluster.local.run_files import CANCELLED, RunFiles
from cluster.local.statuses import RunStatuses
from tests.cluster.local.test_statuses_cache import NODE, passed, statuses_of, waiting_run
from tests.waiting import wait_for


def pass_over(statuses: RunStatuses, *runs: RunFiles) -> int:
    """A pass of the loop over these runs (every live one), now; when it began."""
    begun = time.time_ns()
    for run in runs:
        passed(run, statuses, time.time_ns())
    statuses.passed([f"wf-{run.run_id}" for run in runs], begun_ns=begun)
    return begun


def test_a_pass_names_the_runs_whose_status_changed_since_the_mark(tmp_path: Path) -> None:
    """A run seen first, or whose status differs from the last one made, is named; one read
    again unchanged is not."""
    quiet, moving = waiting_run(tmp_path, "r1"), waiting_run(tmp_path, "r2")
    statuses = statuses_of(quiet)
    statuses.read([], NODE)  # the node statuses are made for
    pass_over(statuses, quiet, moving)
    mark = statuses.changes(None).mark
    assert statuses.changes(mark).names == frozenset()

    moving.mark(CANCELLED)
    pass_over(statuses, quiet, moving)

    assert statuses.changes(mark).names == {"wf-r2"}
    later = statuses.changes(mark).mark
    pass_over(statuses, quiet, moving)
    assert statuses.changes(later).names == frozenset()


def test_a_mark_it_cannot_answer_for_says_cannot_say(tmp_path: Path) -> None:
    """No mark, a mark of another instance, a mark older than the log keeps, or no pass for
    `PASS_TRUST_S`: names None (every status read)."""
    run = waiting_run(tmp_path)
    statuses, other = statuses_of(run), statuses_of(run)
    pass_over(statuses, run)
    pass_over(other, run)
    mark = statuses.changes(None).mark

    assert statuses.changes(None).names is None
    assert statuses.changes(other.changes(None).mark).names is None
    assert statuses.changes(mark).names == frozenset()
    for _ in range(2 * statuses_module.LOG_MIN + 1):  # more changes than the log keeps
        statuses._changed("wf-r1")
    assert statuses.changes(mark).names is None

    stale = statuses_of(run)
    stale.passed(["wf-r1"], begun_ns=time.time_ns() - int(61e9))
    assert stale.changes(stale.changes(None).mark).names is None


def test_a_run_not_read_by_a_pass_is_forgotten(tmp_path: Path) -> None:
    """Its run ended (not live any more): its entry goes, so the memory follows the live
    runs; its status is read from its files when asked."""
    run, ended = waiting_run(tmp_path, "r1"), waiting_run(tmp_path, "r2")
    statuses = RunStatuses({"wf-r1": run, "wf-r2": ended}.__getitem__)
    pass_over(statuses, run, ended)
    pass_over(statuses, run)

    assert statuses.read(["wf-r2"], NODE, may_reuse=["wf-r2"])["wf-r2"] is not None
    assert statuses.reads == 1


def test_without_its_loop_the_backend_cannot_say_what_changed(tmp_path: Path) -> None:
    """Celery beat's worker has no loop: its tick reads every status (after one pass)."""
    backend = LocalBackend(tmp_path / "store", cores=2, memory_gb=2)

    assert backend.changes(None).names is None
    assert backend.changes(backend.changes(None).mark).names is None


def test_with_its_loop_the_backend_names_what_its_passes_found_changed(tmp_path: Path) -> None:
    """Once its loop has passed, a mark it gave is answered: nothing changed since."""
    backend = LocalBackend(tmp_path / "store", cores=2, memory_gb=2, poll_s=0.05)
    backend.subscribe(lambda: None)
    try:
        first = backend.changes(None)
        assert first.names is None
        wait_for(lambda: backend.changes(first.mark).names is not None, what="a pass")
        assert backend.changes(backend.changes(first.mark).mark).names == frozenset()
    finally:
        backend.close()

"""What a tick reads of the followed runs before it asks the backend: one row per run with
whether a final task still has work (C11, C12), and the rest of the rows of the runs its
process has not noted, in one more query."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db.models import F

from runs.controller import followed
from runs.controller.followed import Followed, Unnoted, followed_rows, unnoted_rows
from runs.controller.plan import note_from_row, reusable
from runs.controller.seen import Seen, derived_from
from runs.models import Run, Task
from runs.ports import AttemptFailure, BackendStatus, PodPhase, PodStatus, WorkflowPhase
from tests import factories

pytestmark = pytest.mark.django_db


def run_with_tasks(*tasks: tuple[str, bool, bool], state: str = "running") -> str:
    """A run whose tasks have these (state, observed, logs kept)."""
    run = factories.run(state=state)
    Task.objects.filter(run=run).delete()
    for position, (task_state, observed, logs_kept) in enumerate(tasks):
        Task.objects.create(
            run=run,
            task_id=f"t{position}",
            position=position,
            type="command",
            state=task_state,
            observed=observed,
            logs_kept=logs_kept,
        )
    return run.pk


def test_a_run_has_final_task_work_while_a_final_task_is_not_observed_or_its_logs_kept() -> None:
    """C11, C12: the observations and the logs of a task are kept once it is final, so its
    run is fetched by a tick until both are; an open task has none yet."""
    expected = {
        run_with_tasks(("done", False, False)): True,
        run_with_tasks(("failed", True, False)): True,
        run_with_tasks(("skipped", False, True)): True,
        run_with_tasks(("cancelled", True, False)): True,
        run_with_tasks(("done", True, True)): False,
        run_with_tasks(("running", False, False), ("waiting", False, False)): False,
        run_with_tasks(("done", True, True), ("running", False, False)): False,
        run_with_tasks(("done", True, True), ("done", True, False)): True,
        run_with_tasks(("done", True, False), state="failed"): False,  # not followed
    }
    Run.objects.filter(state="failed").update(pending_logs=False)

    found = {row.pk: row.final_work for row in followed_rows()}

    assert found == {pk: work for pk, work in expected.items() if pk in found}
    assert len(found) == len(expected) - 1


@pytest.mark.parametrize("many", [False, True])
def test_the_rest_of_a_row_is_read_at_the_version_the_tick_read(
    many: bool, django_assert_num_queries: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run written after the tick read its version is left out: its row is newer than the
    status the tick compares it with; so is a run not asked about. No run asked, no query.
    Many runs asked (a new process) are read as the followed runs, not by their ids."""
    if many:
        monkeypatch.setattr(followed, "MANY_UNNOTED", 1)
    kills = {"scan-w0": [0]}
    kept = factories.run(derived_from="1:abc", merge_pending={"t": "2026-12-03T10:00:00"})
    other = factories.run(derived_from="1:abc", oom_kills=kills)
    written = factories.run()
    factories.run()  # not asked about
    versions = {r.pk: r.version for r in (kept, other, written)}
    Run.objects.filter(pk=written.pk).update(version=F("version") + 1)

    with django_assert_num_queries(1):
        rest = unnoted_rows(versions)

    assert sorted(rest) == sorted([kept.pk, other.pk])
    assert rest[kept.pk].derived_from == "1:abc"
    assert (rest[kept.pk].merge_pending, rest[kept.pk].oom_kills) == (
        {"t": "2026-12-03T10:00:00"},
        {},
    )
    assert (rest[other.pk].merge_pending, rest[other.pk].oom_kills) == ({}, kills)
    with django_assert_num_queries(0):
        assert unnoted_rows({}) == {}


def test_what_the_backend_may_answer_from_what_it_observed_itself() -> None:
    """A run noted here: anything (0); one not noted: what the backend observed after its
    record was last written; one written since the tick read its version: nothing (read)."""
    rows = [Followed(pk, 1, "running", f"wf-{pk}", False) for pk in ("a", "b", "c")]
    written = datetime(2026, 12, 3, 10, 0, 0, 5, tzinfo=UTC)
    unnoted = {"b": Unnoted(1, written, "", {}, {})}

    found = reusable(["wf-a", "wf-b", "wf-c"], rows[1:], unnoted)

    second = int(written.replace(microsecond=0).timestamp())
    assert found == {"wf-a": 0, "wf-b": second * 10**9 + 6000}  # the end of its microsecond


# --- gaps found by mutation testing (docs/testing.md) ---------------------------------------

WAITING = BackendStatus(WorkflowPhase.RUNNING, {"t": PodStatus("t", PodPhase.QUEUED)})
ROW = Followed("a", 3, "running", "wf-a", False)


def test_a_run_noted_from_its_row_keeps_its_revision_and_is_not_read_again() -> None:
    """A restarted process notes a run whose row says it derives from the status read, at
    the revision it was read at: the next tick does not read it while the revision stays."""
    seen = Seen()
    rest = Unnoted(3, datetime(2026, 12, 3, tzinfo=UTC), derived_from(3, WAITING), {}, {})

    note_from_row(seen, ROW, rest, WAITING, "7")

    assert seen.to_derive([ROW], {"wf-a": WAITING}) == []
    assert seen.to_read([ROW], {"wf-a": "7"}) == []


def test_a_run_noted_from_its_row_still_watches_its_marker_and_its_kills() -> None:
    """C6, C8 across a restart: a run awaiting its merge marker, noted from its row, is still
    derived at every tick; one whose exit 137 its row counts as a kill for memory is not."""
    killed = BackendStatus(
        WorkflowPhase.RUNNING,
        {"t": PodStatus("t", PodPhase.RETRYING)},
        {"t": [AttemptFailure(0, 137)]},
    )
    at = datetime(2026, 12, 3, tzinfo=UTC)
    merging = Unnoted(3, at, derived_from(3, WAITING), {"scan": "2026-12-03T10:00:00"}, {})
    counted = Unnoted(3, at, derived_from(3, killed), {}, {"t": [0]})
    seen = Seen()

    note_from_row(seen, ROW, merging, WAITING)
    assert seen.to_derive([ROW], {"wf-a": WAITING}) == [ROW]
    note_from_row(seen, ROW, counted, killed)
    assert seen.to_derive([ROW], {"wf-a": killed}) == []

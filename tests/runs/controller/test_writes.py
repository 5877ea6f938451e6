"""The records a tick derived, written in a few statements (runs/controller/writes.py), with
real rows: each run only if its version is still the one read (C22), each field a row does
not change kept as it is, and the statements do not grow with the runs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from runs.controller import writes
from runs.controller.writes import Write, note_derived_from, update_rows, write_if_unchanged
from runs.models import Run, Task
from tests import factories

pytestmark = pytest.mark.django_db

WHEN = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)


def task_of(run: Run) -> Task:
    return Task.objects.get(run=run)


def write(run: Run, **fields: Any) -> Write:
    """The run to `running` with these fields, its task to `running`, at the version read."""
    return Write(
        run.pk,
        run.version,
        {"state": "running", **fields},
        {task_of(run).pk: {"state": "running", "started_at": WHEN}},
    )


def test_a_run_another_writer_moved_meanwhile_is_left_as_that_writer_left_it() -> None:
    """C22: in a batch, of two runs read at their versions, the one cancelled since keeps the
    cancel (its fields and its task), the other is written, its version bumped."""
    kept, moved = factories.run(state="queued"), factories.run(state="queued")
    batch = [write(kept, message="went on"), write(moved, message="went on")]
    Run.objects.filter(pk=moved.pk).update(
        state="cancelled", message="cancelled by paul", version=F("version") + 1
    )

    assert write_if_unchanged(batch) == {kept.pk}

    written, cancelled = Run.objects.get(pk=kept.pk), Run.objects.get(pk=moved.pk)
    assert (written.state, written.message, written.version) == ("running", "went on", 1)
    assert task_of(written).state == "running"
    assert (cancelled.state, cancelled.message, cancelled.version) == (
        "cancelled",
        "cancelled by paul",
        1,
    )
    assert task_of(cancelled).state == "waiting"


def test_a_field_one_run_changes_is_kept_by_the_runs_that_do_not() -> None:
    """One statement for both: the message of one, the pods of the other, each keeping the
    field it does not change; a field both change to the same value is set on both."""
    a = factories.run(state="queued", message="a's", pods={"x": {"phase": "queued"}})
    b = factories.run(state="queued", message="b's", pods={"y": {"phase": "queued"}})
    pods = {"hello": {"phase": "running", "attempts": 1, "node": "n", "exit_code": None}}

    written = write_if_unchanged(
        [Write(a.pk, a.version, {"message": "a's new"}), Write(b.pk, b.version, {"pods": pods})]
    )

    assert written == {a.pk, b.pk}
    a, b = Run.objects.get(pk=a.pk), Run.objects.get(pk=b.pk)
    assert (a.message, a.pods) == ("a's new", {"x": {"phase": "queued"}})
    assert (b.message, b.pods) == ("b's", pods)


def statements(count: int, batch: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """The queries writing `count` runs and their tasks, `batch` runs a statement."""
    monkeypatch.setattr(writes, "BATCH", batch)
    runs = [factories.run(state="queued") for _ in range(count)]
    batch_of = [write(run, pods={"hello": {"phase": run.pk}}) for run in runs]
    with CaptureQueriesContext(connection) as made:
        assert write_if_unchanged(batch_of) == {run.pk for run in runs}
    assert {r.pods["hello"]["phase"] for r in Run.objects.filter(pk__in=[r.pk for r in runs])} == {
        run.pk for run in runs
    }
    return len(made)


def test_the_statements_grow_with_the_batches_not_with_the_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """3 runs and 6 runs in one batch: the same statements (a transaction: lock, runs,
    tasks); 6 runs in batches of 3: those of two batches in one transaction."""
    one_batch = statements(3, 10, monkeypatch)

    assert statements(6, 10, monkeypatch) == one_batch
    assert statements(6, 3, monkeypatch) == one_batch + 3


def test_the_status_a_record_was_derived_from_is_noted_only_at_the_version_read() -> None:
    """Nothing a reader sees changes: no new version; a run written since keeps its note."""
    same, moved = factories.run(), factories.run()
    Run.objects.filter(pk=moved.pk).update(version=F("version") + 1, derived_from="1:theirs")

    note_derived_from({same.pk: (0, "0:ours"), moved.pk: (0, "0:ours")})

    assert Run.objects.get(pk=same.pk).derived_from == "0:ours"
    assert Run.objects.get(pk=same.pk).version == 0
    assert Run.objects.get(pk=moved.pk).derived_from == "1:theirs"


def test_every_write_of_runs_stamps_when_it_was_made() -> None:
    """`updated_at`, which a tick reads the rows written since by: a statement of the
    controller's and any `update()` of runs, unless it says the time itself."""
    run = factories.run()
    Run.objects.filter(pk=run.pk).update(updated_at=WHEN)
    assert Run.objects.get(pk=run.pk).updated_at == WHEN

    update_rows(Run, {run.pk: {"message": "m"}})
    after_rows = Run.objects.get(pk=run.pk).updated_at
    Run.objects.filter(pk=run.pk).update(updated_at=WHEN)
    Run.objects.filter(pk=run.pk).update(message="n")

    assert after_rows > WHEN
    assert Run.objects.get(pk=run.pk).updated_at > WHEN

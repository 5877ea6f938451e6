"""What a split task's progress lines say (runs/selectors/progress_lines.py): the distinct
units each worker did, when each unit was first done and what it took, the highest peak of a
unit's process; read once, then only what was appended."""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime

import pytest

from runs.selectors import progress_lines
from runs.selectors.progress_lines import UnitLines, unit_lines
from runs.store import task_paths
from simrun_harness.progress import ProgressWriter
from tests import factories
from tests.runs.reads import count_reads

pytestmark = pytest.mark.django_db

T0 = "2026-12-04T10:00:00+00:00"
T1 = "2026-12-04T10:00:05+00:00"


def line(unit: str, worker: str = "scan-w0", at: str = T0, seconds: float = 0.5) -> bytes:
    return (
        f'{{"event":"unit_done","time":"{at}","worker":"{worker}","unit":"{unit}",'
        f'"seconds":{seconds},"peak_memory_gb":0.25}}\n'
    ).encode()


def test_a_unit_done_twice_counts_once_per_worker_at_its_first_time() -> None:
    lines = UnitLines()
    lines.read(
        line("u000001", at=T1, seconds=2.0)
        + line("u000001", "scan-w1", at=T0, seconds=1.0)
        + line("u000001", at=T1)
        + line("u000003", "scan-w1")
    )

    assert lines.units_by_worker() == {"scan-w0": 1, "scan-w1": 2}
    assert lines.first_times() == [datetime(2026, 12, 4, 10, 0, tzinfo=UTC)] * 2
    assert sorted(lines.unit_seconds()) == [0.5, 1.0]
    assert lines.peak_gb == 0.25


def test_torn_foreign_and_other_events_are_skipped() -> None:
    lines = UnitLines()
    lines.read(
        b'{"event":"unit_done","time":"' + T0.encode() + b'","worker":"w"\n'  # torn
        b'{"event":"claims_returned","time":"'
        + T0.encode()
        + b'","worker":"w","units":[]}\n'
        + line("not-a-unit")
        + b"not json at all\n"
        + line("u000002")
    )

    assert lines.units_by_worker() == {"scan-w0": 1}
    assert len(lines.first_times()) == 1 and math.isnan(lines.first_at[0])


def test_a_view_reads_only_the_lines_appended_since_its_last_read(
    store: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = factories.run()
    task = run.tasks.get()
    paths = task_paths(run.pk, task.task_id)
    paths.root.mkdir(parents=True)
    writer = ProgressWriter(paths.progress, "hello-w0")
    writer.unit_done("u000000", 0.5, 0.1)
    writer.flush()
    read = count_reads(monkeypatch)
    assert unit_lines(task).units_by_worker() == {"hello-w0": 1}
    writer.unit_done("u000001", 0.5, 0.3)
    writer.close()

    found = unit_lines(task)

    assert found.units_by_worker() == {"hello-w0": 2} and found.peak_gb == 0.3
    assert read[1] == os.path.getsize(paths.progress) - read[0]


def test_a_file_replaced_is_read_again_from_its_start(store: object) -> None:
    run = factories.run()
    task = run.tasks.get()
    paths = task_paths(run.pk, task.task_id)
    paths.root.mkdir(parents=True)
    paths.progress.write_bytes(line("u000000") + line("u000001"))
    assert unit_lines(task).units_by_worker() == {"scan-w0": 2}
    replacement = paths.root / "progress.new"
    replacement.write_bytes(line("u000005", "scan-w1"))
    os.replace(replacement, paths.progress)

    assert unit_lines(task).units_by_worker() == {"scan-w1": 1}
    assert len(progress_lines._SUMMARIES) <= progress_lines.KEPT


def test_the_times_in_order_and_the_median_follow_the_lines_read() -> None:
    """A view takes the units' times in order and their median from what the lines said; what
    was derived is given again until more lines are read, then derived anew."""
    lines = UnitLines()
    lines.read(line("u000002", at=T1, seconds=3.0) + line("u000000", seconds=1.0))
    lines.offset = 100
    first = lines.done_stamps()
    assert first == [datetime.fromisoformat(T0).timestamp(), datetime.fromisoformat(T1).timestamp()]
    assert lines.median_seconds() == 2.0
    assert lines.done_stamps() is first  # nothing read since: not derived again

    lines.read(line("u000001", seconds=8.0))
    lines.offset = 200

    assert len(lines.done_stamps()) == 3 and lines.median_seconds() == 3.0


def test_lines_the_harness_writes_and_lines_of_another_shape_are_read_alike(
    tmp_path: object,
) -> None:
    """The harness's own lines are taken by one pattern, any other JSON shape of the same
    event line by line: a chunk mixing both says what each line says."""
    from pathlib import Path

    progress = Path(str(tmp_path)) / "progress.jsonl"
    writer = ProgressWriter(progress, "scan-w0")
    writer.unit_done("u000000", 0.25, 0.5)
    writer.unit_done("u000001", 2e-06, None)
    writer.close()
    other_shape = (
        b'{"unit":"u000002","worker":"scan-w1","event":"unit_done","time":"' + T1.encode() + b'",'
        b'"peak_memory_gb":0.75,"seconds":2}\n'
    )
    lines = UnitLines()

    lines.read(progress.read_bytes() + other_shape)

    assert lines.units_by_worker() == {"scan-w0": 2, "scan-w1": 1}
    assert lines.unit_seconds() == [0.25, 2e-06, 2.0]
    assert lines.peak_gb == 0.75
    assert len(lines.first_times()) == 3

"""What a web process read of a progress file is saved for the processes that never read it
(runs/selectors/progress_saved.py): they start from there and read only the lines appended
since; a summary of another file, of a file cut or replaced, or damaged is not used."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runs.models import Task
from runs.selectors import progress_lines, progress_saved
from runs.selectors.progress_lines import UnitLines, unit_lines
from runs.store import task_paths
from tests import factories
from tests.runs.reads import count_reads

pytestmark = pytest.mark.django_db

T0 = "2026-12-04T10:00:00+00:00"


def line(index: int, worker: str = "scan-w0", seconds: float = 0.5, peak: float = 0.25) -> bytes:
    return (
        f'{{"event":"unit_done","time":"2026-12-04T10:00:{index % 60:02d}+00:00",'
        f'"worker":"{worker}","unit":"u{index:06d}","seconds":{seconds},'
        f'"peak_memory_gb":{peak}}}\n'
    ).encode()


def task_with_lines(lines: bytes) -> tuple[Task, Path]:
    run = factories.run()
    task = run.tasks.get()
    paths = task_paths(run.pk, task.task_id)
    paths.root.mkdir(parents=True)
    paths.progress.write_bytes(lines)
    return task, paths.progress


def a_new_process() -> None:
    """What a process that never read any progress file keeps: nothing."""
    progress_lines._SUMMARIES.clear()


def summary(lines: UnitLines) -> tuple[object, ...]:
    return (
        lines.units_by_worker(),
        lines.first_times(),
        lines.unit_seconds(),
        lines.peak_gb,
        lines.done_stamps(),
        lines.median_seconds(),
    )


@pytest.fixture
def bytes_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes of lines each read parses; every read is saved for the other processes."""
    monkeypatch.setattr(progress_saved, "SAVE_EVERY", 1)
    return count_reads(monkeypatch)


def test_a_process_that_never_read_the_file_reads_only_what_was_appended_since_the_save(
    store: Path, bytes_read: list[int]
) -> None:
    task, progress = task_with_lines(line(0) + line(3, "scan-w1", seconds=2.0, peak=0.75) + line(2))
    unit_lines(task)
    a_new_process()
    appended = line(5, "scan-w1", seconds=4.0) + line(0, "scan-w1")
    with open(progress, "ab") as out:
        out.write(appended)

    found = unit_lines(task)

    assert bytes_read[1:] == [len(appended)]
    a_new_process()
    os.unlink(progress_saved._place(str(progress)))
    assert summary(found) == summary(unit_lines(task))
    assert found.units_by_worker() == {"scan-w0": 2, "scan-w1": 3}
    assert found.peak_gb == 0.75


def test_the_summary_of_a_file_since_replaced_is_not_used(
    store: Path, bytes_read: list[int]
) -> None:
    task, progress = task_with_lines(line(0) + line(1))
    unit_lines(task)
    a_new_process()
    replacement = progress.with_name("progress.new")
    replacement.write_bytes(line(7, "scan-w1") + line(8, "scan-w1") + line(9, "scan-w1"))
    os.replace(replacement, progress)

    found = unit_lines(task)

    assert found.units_by_worker() == {"scan-w1": 3}
    assert bytes_read[-1] == progress.stat().st_size


def test_the_summary_of_a_file_since_cut_is_not_used(store: Path, bytes_read: list[int]) -> None:
    task, progress = task_with_lines(line(0) + line(1) + line(2))
    unit_lines(task)
    a_new_process()
    with open(progress, "r+b") as out:
        out.truncate(len(line(0)))

    assert unit_lines(task).units_by_worker() == {"scan-w0": 1}


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) - 3],  # cut short
        lambda data: data.replace(b'"units":10', b'"units":99', 1),  # lengths that lie
        lambda data: data.replace(b'"offset":', b'"offset":-', 1),
        lambda data: b"not a summary\n" + data,
        lambda data: data.replace(b"\n", b" ", 1),  # no header line
    ],
    ids=["cut", "lying-lengths", "negative-offset", "no-magic", "no-header-end"],
)
def test_a_damaged_summary_is_not_used(store: Path, bytes_read: list[int], damage: object) -> None:
    task, progress = task_with_lines(b"".join(line(i) for i in range(10)))
    expected = summary(unit_lines(task))
    saved = progress_saved._place(str(progress))
    saved.write_bytes(damage(saved.read_bytes()))  # type: ignore[operator]
    a_new_process()
    del bytes_read[:]

    found = unit_lines(task)

    assert bytes_read == [progress.stat().st_size]
    assert summary(found) == expected


def test_a_small_read_is_not_saved(store: Path) -> None:
    task, progress = task_with_lines(line(0))

    unit_lines(task)

    assert not progress_saved._place(str(progress)).exists()


def test_only_the_latest_summaries_are_kept(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_saved, "SAVE_EVERY", 1)
    monkeypatch.setattr(progress_saved, "KEPT_FILES", 2)
    progresses = []
    for at in (1_000, 2_000, 3_000):
        task, progress = task_with_lines(line(0))
        unit_lines(task)
        progresses.append(progress)
        if progress_saved._place(str(progress)).exists():
            os.utime(progress_saved._place(str(progress)), (at, at))  # the saves in order

    kept = [progress_saved._place(str(p)).exists() for p in progresses]

    assert kept == [False, True, True]

"""S14: runs compared by their outputs' bytes: one row per output file with its SHA-256 in
each run, so a run made again from a crate shows whether it made the same bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from runs.cli.run_commands import NOT_COMPARED as SHOWN_NOT_COMPARED
from runs.selectors.compare import NOT_COMPARED, compare_runs
from runs.selectors.output_digests import output_digests
from runs.store import task_paths
from tests.runs.crates.scenes import finished_scan

pytestmark = pytest.mark.django_db


def outputs_rows(*run_ids: str) -> dict[str, tuple[list[object], bool]]:
    rows = compare_runs(list(run_ids)).rows
    return {r.key: (r.values, r.differs) for r in rows if r.section == "outputs"}


def test_two_runs_with_the_same_output_bytes_have_no_differing_output_row(store: Path) -> None:
    one, two = finished_scan(), finished_scan()

    rows = outputs_rows(one.pk, two.pk)

    data = (task_paths(one.pk, "scan").out / "scan.json").read_bytes()
    assert rows["scan/scan.json"] == ([hashlib.sha256(data).hexdigest()] * 2, False)
    assert set(rows) == {"scan/scan.json", "summary/summary.json"}  # no merge marker
    assert not any(differs for _, differs in rows.values())


def test_a_changed_or_missing_output_file_differs(store: Path) -> None:
    one, two = finished_scan(), finished_scan()
    (task_paths(two.pk, "scan").out / "scan.json").write_text('{"points": 7}')
    (task_paths(two.pk, "summary").out / "extra.txt").write_text("more")

    rows = outputs_rows(one.pk, two.pk)

    assert rows["scan/scan.json"][1] is True
    assert rows["summary/extra.txt"] == ([None, hashlib.sha256(b"more").hexdigest()], True)
    assert rows["summary/summary.json"][1] is False


def test_a_run_with_more_output_files_than_are_hashed_says_it_was_not_compared(
    store: Path,
) -> None:
    run = finished_scan()

    found = output_digests(run.pk, max_files=1)

    assert (found.digests, found.not_compared) == ({}, "more than 1 output files")
    assert SHOWN_NOT_COMPARED == NOT_COMPARED  # the key the command line reads

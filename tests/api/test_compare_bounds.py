"""A comparison hashes runs' outputs for SIMRUN_COMPARE_MAX_S at most, then says which runs
and files it did not compare; what it hashed of ended runs it does not hash again."""

from __future__ import annotations

import time

import pytest
from pytest_django import Settings

from runs.models import Run
from runs.store import task_paths
from tests import factories
from tests.api.conftest import Lab

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024
NOT_COMPARED = "(not compared)"
NOT_HASHED = "(not hashed)"


def with_outputs(lab: Lab, sizes: dict[str, int], state: str = "succeeded") -> Run:
    """A run whose task `hello` made sparse output files of these sizes (quick to make, and
    as long to hash as any)."""
    run = factories.run(by=lab.person.identity, state=state)
    out = task_paths(run.id, "hello").out
    out.mkdir(parents=True)
    for name, size in sizes.items():
        with (out / name).open("wb") as handle:
            handle.truncate(size)
    return run


def outputs(lab: Lab, runs: list[Run]) -> tuple[dict[str, list[object]], dict[str, str]]:
    """The outputs rows of a comparison (values by key) and the runs it says it left out."""
    response = lab.agent.client.get(f"/api/compare/?runs={','.join(r.id for r in runs)}")
    assert response.status_code == 200, response.content
    body = response.json()
    rows = {r["key"]: r["values"] for r in body["rows"] if r["section"] == "outputs"}
    return rows, body["not_compared"]


def test_a_comparison_past_its_deadline_is_answered_then_naming_what_it_left(
    lab: Lab, settings: Settings
) -> None:
    """Three runs of 4 files of 64 MiB (seconds of hashing; a quarter of a second for one
    file) against a deadline of 0.05 s: answered within a fraction of a second, the files
    and runs not hashed named in the rows and in `not_compared`, never "identical"."""
    settings.SIMRUN_COMPARE_MAX_S = 0.05
    files = {f"part-{n}.bin": 64 * MIB for n in range(4)}
    runs = [with_outputs(lab, files) for _ in range(3)]
    outputs(lab, [with_outputs(lab, {}), with_outputs(lab, {})])  # the API's first answer loads it

    began = time.monotonic()
    rows, left_out = outputs(lab, runs)
    took = time.monotonic() - began

    assert took < 0.8, took
    assert set(left_out) == {r.id for r in runs}  # the first cut in the middle
    assert all("SIMRUN_COMPARE_MAX_S" in why for why in left_out.values())
    assert rows[NOT_COMPARED][1:] == [left_out[r.id] for r in runs[1:]]
    for name in files:
        assert rows[f"hello/{name}"][1:] == [NOT_HASHED, NOT_HASHED]
    assert any(NOT_HASHED in values for key, values in rows.items() if key != NOT_COMPARED)


def test_a_repeat_comparison_of_ended_runs_does_not_hash_their_files_again(
    lab: Lab, settings: Settings
) -> None:
    """Once hashed whole, two ended runs of 256 MiB each compare again within a deadline
    far shorter than hashing a single one of their files takes."""
    settings.SIMRUN_COMPARE_MAX_S = 60
    runs = [with_outputs(lab, {"big.bin": 256 * MIB}) for _ in range(2)]
    first, left_out = outputs(lab, runs)
    assert left_out == {} and NOT_COMPARED not in first

    settings.SIMRUN_COMPARE_MAX_S = 0.2
    again, left_out = outputs(lab, runs)

    assert left_out == {}
    assert again == first

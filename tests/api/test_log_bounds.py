"""A task's logs are answered within SIMRUN_LOG_ANSWER_MAX_BYTES in all, whatever its run's
code wrote into `tasks/<task>/logs/`: the newest bytes of each log, each saying it was cut;
following them reads no more at a poll."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_django import Settings

from runs.models import Run
from runs.store import task_paths
from tests import factories
from tests.api.conftest import Lab, streamed

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024
CAP = 256 * 1024
LOGS = 64


def last_line(number: int) -> str:
    return f"the end of log {number}\n"


def plant(run: Run, sizes: list[int], pod: str = "hello") -> Path:
    """Kept logs `<pod>-<n>.log` of the given sizes, sparse but for their last line."""
    logs = task_paths(run.id, "hello").logs
    logs.mkdir(parents=True, exist_ok=True)
    for number, size in enumerate(sizes):
        end = f"\n{last_line(number)}".encode()
        with (logs / f"{pod}-{number}.log").open("wb") as handle:
            handle.truncate(size - len(end))
            handle.seek(size - len(end))
            handle.write(end)
    return logs


@pytest.fixture
def capped(settings: Settings) -> None:
    settings.SIMRUN_LOG_ANSWER_MAX_BYTES = CAP


def test_many_large_kept_logs_are_answered_within_the_cap_newest_lines_first(
    lab: Lab, capped: None
) -> None:
    """64 kept logs of 1 MiB (64 MiB in all) and one short one: the answer holds at most the
    cap; the short log whole, each large one its last bytes, cut to its share of the cap."""
    run = factories.run(by=lab.person.identity, state="succeeded")
    logs = plant(run, [MIB] * LOGS)
    (logs / f"hello-{LOGS}.log").write_text("one\ntwo\n")

    entries = lab.other.client.get(f"/api/runs/{run.id}/logs/?task=hello").json()

    assert len(entries) == LOGS + 1
    assert sum(len(e["text"].encode()) for e in entries) <= CAP
    *large, short = entries
    assert (short["text"], short["cut"], short["truncated"]) == ("one\ntwo\n", None, False)
    for number, entry in enumerate(large):
        assert entry["text"].endswith(last_line(number)), entry["text"][-80:]
        assert (entry["cut"], entry["truncated"]) == ("answer", True)
        assert entry["start"] == MIB - len(entry["text"].encode())


def test_the_tail_of_many_large_kept_logs_is_within_the_cap(lab: Lab, capped: None) -> None:
    run = factories.run(by=lab.person.identity, state="succeeded")
    plant(run, [MIB] * LOGS)

    entries = lab.other.client.get(f"/api/runs/{run.id}/logs/?task=hello&tail=1").json()

    assert [e["text"] for e in entries] == [last_line(n) for n in range(LOGS)]
    assert {e["cut"] for e in entries} == {None}


def test_following_many_large_kept_logs_reads_and_sends_at_most_the_cap(
    lab: Lab, capped: None
) -> None:
    """The stream of an ended task's logs sends each log's share of the cap, saying how many
    bytes of it were left out, then ends."""
    run = factories.run(by=lab.person.identity, state="succeeded")
    plant(run, [MIB] * LOGS)

    response = lab.person.client.get(f"/api/runs/{run.id}/logs/?task=hello&follow=true")
    sent = streamed(response).decode()

    assert len(sent.encode()) <= CAP + LOGS * 200
    for number in range(LOGS):
        assert f"[hello#{number}] {last_line(number)}" in sent
    notes = [line for line in sent.splitlines() if line.startswith("[simrun] hello#")]
    assert len(notes) == LOGS
    assert "bytes left out" in notes[0] and "SIMRUN_LOG_ANSWER_MAX_BYTES" in notes[0]

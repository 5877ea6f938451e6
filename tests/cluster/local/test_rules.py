"""The plain rules of the local backend: admission, retries and phases, log reading."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cluster.local.admission import Demand, Holding, admit
from cluster.local.atomic_files import read_json
from cluster.local.attempts import Attempt, Eviction, ExitStatus
from cluster.local.dag import RETRY_LIMIT, next_memory, pod_phase
from runs.ports import PodPhase, read_log
from tests.cluster.local.builders import shape

BASE, EXTRA, LOW_EXTRA = 20000, 2000, 1000


def attempt(number: int, code: int | None, *, oom: bool = False, evicted: bool = False) -> Attempt:
    ended = ExitStatus(code, oom, 1.0, lost=code is None)
    return Attempt(
        number,
        Path("/nowhere"),
        0.0,
        1.0,
        0.5,
        None,
        None,
        Eviction("preempted", 0.5) if evicted else None,
        ended,
    )


def phase(*codes: int | None, **flags: bool) -> PodPhase:
    attempts = [attempt(i, c) for i, c in enumerate(codes)]
    options = {"ready": True, "blocked": False, "halted": False, "fail_fast": False, **flags}
    return pod_phase(attempts, **options)[0]


# -- admission ------------------------------------------------------------------------------


def demand(run: str, priority: int, cores: float = 1, order: int = 0) -> Demand:
    return Demand((run, "p"), priority, cores, 0.5, (0.0, order))


def holding(
    run: str, priority: int, *, extra: bool, started: float = 0, evicting: bool = False
) -> Holding:
    return Holding((run, "p"), priority, 1, 0.5, extra, started, evicting)


def test_a_pod_that_fits_starts() -> None:
    assert admit(2, 4, [demand("a", BASE)], []).start == (("a", "p"),)


def test_a_base_pod_evicts_the_fewest_extra_workers_of_the_lowest_priority_newest_first() -> None:
    holdings = [
        holding("x", EXTRA, extra=True, started=1),
        holding("y", LOW_EXTRA, extra=True, started=1),
        holding("z", LOW_EXTRA, extra=True, started=2),
    ]
    decision = admit(3, 4, [demand("a", BASE)], holdings)
    assert decision.start == ()
    assert [key for key, _ in decision.evict] == [("z", "p")]


def test_base_pods_and_equal_priorities_are_never_evicted() -> None:
    holdings = [holding("x", LOW_EXTRA, extra=False), holding("y", BASE, extra=True)]
    assert admit(2, 4, [demand("a", BASE)], holdings).evict == ()


def test_an_eviction_under_way_is_not_repeated() -> None:
    holdings = [
        holding("x", LOW_EXTRA, extra=True, evicting=True),
        holding("y", LOW_EXTRA, extra=True),
    ]
    assert admit(2, 4, [demand("a", BASE)], holdings).evict == ()


def test_a_waiting_pod_keeps_lower_priorities_from_starting_in_front_of_it() -> None:
    holdings = [holding("x", BASE, extra=False)]
    demands = [demand("big", BASE, cores=2), demand("small", LOW_EXTRA, cores=1)]
    assert admit(2, 4, demands, holdings).start == ()


def test_a_pod_larger_than_the_node_holds_nothing_back() -> None:
    demands = [demand("huge", BASE, cores=8), demand("small", LOW_EXTRA, cores=1)]
    assert admit(2, 4, demands, []).start == (("small", "p"),)


def test_a_reserved_node_evicts_and_keeps_off_other_runs() -> None:
    decision = admit(
        4,
        4,
        [demand("other", BASE), demand("mine", LOW_EXTRA)],
        [holding("x", BASE, extra=False)],
        reserved_by="mine",
    )
    assert decision.start == (("mine", "p"),)
    assert decision.evict == ((("x", "p"), "the node is reserved for run mine"),)


# -- retries and phases ---------------------------------------------------------------------


def test_the_attempt_after_a_kill_for_memory_gets_the_retry_memory() -> None:
    """M9: an attempt after an exit 137 gets the retry memory and memory per worker."""
    pod = shape(memory_gb=0.5, retry_memory_gb=2.0)
    assert next_memory(pod, []) == (0.5, 0.25)
    assert next_memory(pod, [attempt(0, 137, oom=True)]) == (2.0, 0.5)


def test_an_attempt_after_a_preemption_that_followed_a_kill_for_memory_gets_the_first_memory() -> (
    None
):
    """K9: only the last attempt counts, as with Argo's lastRetry."""
    pod = shape(memory_gb=0.5, retry_memory_gb=2.0)
    after = [attempt(0, 137, oom=True), attempt(1, 143, evicted=True)]
    assert next_memory(pod, after) == (0.5, 0.25)


def test_only_a_stopped_pod_is_retried() -> None:
    """K7: no exit code, 137 and 143 are retried; 3, 4 and any other exit fail at once."""
    assert phase(None) is PodPhase.PREEMPTED
    assert phase(143) is PodPhase.PREEMPTED
    assert phase(137) is PodPhase.RETRYING
    assert [phase(code) for code in (1, 3, 4, 2)] == [PodPhase.FAILED] * 4


def test_a_pod_killed_for_memory_at_its_retry_memory_is_not_retried() -> None:
    """C7 in the backend too: the run fails on it, so no third attempt may start (and run
    after the run ended) in the moment before the controller stops the workflow."""
    options = {"ready": True, "blocked": False, "halted": False, "fail_fast": False}

    def of(*attempts: Attempt) -> PodPhase:
        return pod_phase(list(attempts), **options)[0]

    once = attempt(0, 137, oom=True)
    assert of(once) is PodPhase.RETRYING
    twice = of(once, attempt(1, 137, oom=True))
    assert twice is PodPhase.FAILED
    message = pod_phase([once, attempt(1, 137, oom=True)], **options)[1]
    assert message.endswith("again at the retry memory: not retried")
    # at the first memory again (after an eviction that exited 143): retried
    assert of(once, attempt(1, 143, evicted=True), attempt(2, 137, oom=True)) is PodPhase.RETRYING
    # a 137 without the evidence of a kill for memory is retried
    assert of(once, attempt(1, 137)) is PodPhase.RETRYING


def test_the_retries_of_a_pod_end_after_its_limit() -> None:
    """K8: every eviction counts against the limit of 100 retries."""
    assert phase(*([143] * RETRY_LIMIT)) is PodPhase.PREEMPTED
    assert phase(*([143] * (RETRY_LIMIT + 1))) is PodPhase.FAILED


def test_a_pod_without_attempts_waits_queues_or_is_skipped() -> None:
    assert phase(ready=False) is PodPhase.WAITING
    assert phase() is PodPhase.QUEUED
    assert phase(blocked=True) is PodPhase.SKIPPED
    assert phase(halted=True) is PodPhase.SKIPPED
    assert phase(ready=False, fail_fast=True) is PodPhase.SKIPPED
    assert phase(143, halted=True) is PodPhase.FAILED


# -- logs -----------------------------------------------------------------------------------


def test_a_log_is_read_up_to_its_byte_limit(tmp_path: Path) -> None:
    """B10: at most a byte limit of a log, optionally the first bytes of its last lines."""
    path = tmp_path / "log"
    path.write_text("".join(f"line {i}\n" for i in range(1000)))
    assert read_log(path.open("rb"), None, 14) == ("line 0\nline 1\n", True)
    assert read_log(path.open("rb"), 2, 1000) == ("line 998\nline 999\n", False)
    assert read_log(path.open("rb"), 2, 9) == ("line 998\n", True)
    assert read_log(path.open("rb"), None, 10**6)[0].count("\n") == 1000


@pytest.mark.parametrize("kind", ["link to /dev/zero", "fifo"])
def test_a_state_file_a_pod_replaced_reads_as_absent_at_once(tmp_path: Path, kind: str) -> None:
    """A pod's code (the service's own user here) made an attempt's exit status a link to an
    endless device or a FIFO: the watcher neither reads for ever nor waits for a writer."""
    path = tmp_path / "exit.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    assert read_json(path) is None

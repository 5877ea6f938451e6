"""Resource resolution: hint ← history ← workflow, memory learned from peaks, retry memory."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from runs.plans import ObservationValue
from runs.resources import (
    MEMORY_MARGIN,
    MEMORY_QUANTILE,
    RETRY_MARGIN,
    observation_at_limit,
    observation_of_report,
    quantile,
    resolve,
    retry_step_gb,
    round_up_gb,
)
from runs.workflow import ResourceOverrides
from simrun_harness.plugin import ResourceHint
from simrun_harness.report import UnitSeconds, WorkerReport
from tests.builders import SCAN_SHAPE

HINT = ResourceHint(
    cores_per_process=1.0, memory_base_gb=0.5, memory_per_worker_gb=8.0, scratch_gb=5, gpus=0
)
NONE = ResourceOverrides()


def seen(peak_per_process: float, **fields: object) -> ObservationValue:
    values: dict[str, object] = {"processes": 4, "units_done": 10, "memory_per_worker_gb": 8.0}
    values.update(fields)
    return ObservationValue(peak_memory_per_process_gb=peak_per_process, **values)  # type: ignore[arg-type]


def test_without_history_or_overrides_every_value_is_the_hint() -> None:
    resolved = resolve(hint=HINT, history=[], overrides=NONE)
    assert (resolved.cores_per_process, resolved.memory_base_gb) == (1.0, 0.5)
    assert (resolved.memory_per_worker_gb, resolved.scratch_gb, resolved.gpus) == (8.0, 5, 0)
    assert resolved.processes is None
    assert {k: v for k, v in resolved.source.items() if k != "retry_memory_per_worker_gb"} == {
        "cores_per_process": "hint",
        "memory_base_gb": "hint",
        "memory_per_worker_gb": "hint",
        "scratch_gb": "hint",
        "gpus": "hint",
        "merge_memory_gb": "hint",
    }
    assert (resolved.merge_memory_gb, resolved.merge_retry_memory_gb) == (8.5, 8.5 + 8.5 / 4)


def merged(peak: float | None, **fields: object) -> ObservationValue:
    """An observation of a merge pod (one process) that peaked at `peak` GiB."""
    values: dict[str, object] = {"worker": "scan-merge", "memory_limit_gb": 3.0}
    values.update(fields)
    return ObservationValue(peak_memory_gb=peak, **values)  # type: ignore[arg-type]


def test_the_merge_memory_is_learned_from_merges_only() -> None:
    """A merge pod asks for the 90 % quantile of earlier merges' peaks with the margin; the
    workers' memory is not moved by merges, nor the merge's by workers."""
    merges = [merged(2.0), merged(3.0), merged(2.5)]
    resolved = resolve(hint=HINT, history=[seen(1.0)], overrides=NONE, merges=merges)
    expected = round_up_gb(quantile([2.0, 2.5, 3.0], MEMORY_QUANTILE) * (1 + MEMORY_MARGIN))
    assert (resolved.merge_memory_gb, resolved.source["merge_memory_gb"]) == (expected, "history")
    alone = resolve(hint=HINT, history=[seen(1.0)], overrides=NONE)
    assert resolved.memory_per_worker_gb == alone.memory_per_worker_gb
    assert alone.merge_memory_gb == 0.5 + alone.memory_per_worker_gb


def test_a_merge_killed_for_memory_counts_at_least_at_its_limit() -> None:
    killed = resolve(
        hint=HINT, history=[], overrides=NONE, merges=[merged(1.0, oom_killed=True)] * 3
    )
    assert killed.merge_memory_gb == round_up_gb(3.0 * (1 + MEMORY_MARGIN))


def test_the_merge_retry_is_above_the_highest_merge_peak_and_capped_by_the_node() -> None:
    merges = [merged(2.0)] * 9 + [merged(10.0)]
    resolved = resolve(hint=HINT, history=[], overrides=NONE, merges=merges)
    assert resolved.merge_retry_memory_gb == round_up_gb(10.0 * (1 + RETRY_MARGIN))
    capped = resolve(hint=HINT, history=[], overrides=NONE, merges=merges, node_memory_gb=8)
    assert capped.merge_retry_memory_gb == 8.0
    assert capped.merge_memory_gb is not None and capped.merge_memory_gb <= 8.0


def test_history_overrides_the_hint_and_the_workflow_overrides_history() -> None:
    history = [seen(1.0), seen(1.2), seen(0.9)]
    learned = resolve(hint=HINT, history=history, overrides=NONE)
    assert learned.source["memory_per_worker_gb"] == "history"
    assert learned.memory_per_worker_gb < HINT.memory_per_worker_gb
    workflow = ResourceOverrides(memory_per_worker_gb=3.0, cores_per_process=2.0, processes=6)
    chosen = resolve(hint=HINT, history=history, overrides=workflow)
    assert (chosen.memory_per_worker_gb, chosen.cores_per_process, chosen.processes) == (3, 2, 6)
    assert chosen.source["memory_per_worker_gb"] == "workflow"
    assert chosen.source["cores_per_process"] == "workflow"
    assert chosen.source["processes"] == "workflow"
    assert chosen.source["memory_base_gb"] == "hint"


def test_every_resource_the_workflow_sets_wins() -> None:
    workflow = ResourceOverrides(memory_base_gb=2.0, scratch_gb=50, gpus=1)
    resolved = resolve(hint=HINT, history=[seen(1.0)], overrides=workflow)
    assert (resolved.memory_base_gb, resolved.scratch_gb, resolved.gpus) == (2.0, 50, 1)
    assert {resolved.source[k] for k in ("memory_base_gb", "scratch_gb", "gpus")} == {"workflow"}


def test_memory_per_worker_covers_a_high_quantile_of_the_peaks_with_a_margin() -> None:
    """M13: the first memory per worker from a high quantile of per-process peaks."""
    peaks = [1.0 + i / 20 for i in range(40)]  # 1.0 .. 2.95 GiB
    resolved = resolve(hint=HINT, history=[seen(p) for p in peaks], overrides=NONE)
    covered = sum(p <= resolved.memory_per_worker_gb for p in peaks) / len(peaks)
    assert covered >= MEMORY_QUANTILE
    assert resolved.memory_per_worker_gb > quantile(peaks, MEMORY_QUANTILE)  # the margin
    assert resolved.memory_per_worker_gb < 2 * max(peaks)


def test_a_kill_for_memory_counts_at_least_at_the_memory_it_was_given() -> None:
    killed = seen(1.0, oom_killed=True, memory_per_worker_gb=3.0)
    resolved = resolve(hint=HINT, history=[killed], overrides=NONE)
    assert resolved.memory_per_worker_gb >= 3.0


def test_a_kill_without_a_report_is_an_observation_at_the_pods_limit() -> None:
    """C11: a kill for memory without a report counts as an observation at the limit."""
    shape = SCAN_SHAPE
    first = observation_at_limit(shape=shape, retried=False, worker="scan-w1", attempt=0)
    assert (first.peak_memory_gb, first.memory_limit_gb, first.peak_memory_per_process_gb) == (
        8.5,
        8.5,
        2.0,
    )
    assert first.oom_killed and not first.from_report
    again = observation_at_limit(shape=shape, retried=True, worker="scan-w1", attempt=1)
    assert (again.peak_memory_gb, again.memory_per_worker_gb, again.processes) == (12.5, 3.0, 4)
    resolved = resolve(hint=HINT, history=[first], overrides=NONE)
    assert resolved.memory_per_worker_gb >= 2.0
    assert resolved.retry_memory_per_worker_gb is not None
    assert resolved.retry_memory_per_worker_gb > 2.0


def test_by_default_memory_per_worker_is_the_pods_peak_shared_over_its_processes() -> None:
    """The rule "pod" (the harness enforces the pod's limit) is the default; "process"
    asks for the largest process each."""
    history = [seen(3.0, peak_memory_gb=0.5 + 4 * 1.0, processes=4) for _ in range(5)]
    by_process = resolve(hint=HINT, history=history, overrides=NONE, memory_rule="process")
    by_pod = resolve(hint=HINT, history=history, overrides=NONE)
    assert by_process.memory_per_worker_gb >= 3.0
    assert 1.0 <= by_pod.memory_per_worker_gb < 1.5
    assert by_pod.retry_memory_per_worker_gb is not None
    assert by_pod.retry_memory_per_worker_gb > 3.0  # the retry covers the largest process


def test_the_retry_is_above_the_highest_peak_seen() -> None:
    history = [seen(1.0)] * 30 + [seen(6.0)]
    resolved = resolve(hint=HINT, history=history, overrides=NONE)
    assert resolved.retry_memory_per_worker_gb is not None
    assert resolved.retry_memory_per_worker_gb > 6.0
    assert resolved.source["retry_memory_per_worker_gb"] == "history"


def test_without_history_the_retry_is_the_first_memory_plus_a_step() -> None:
    resolved = resolve(hint=HINT, history=[], overrides=NONE)
    assert resolved.retry_memory_per_worker_gb == 8.0 + retry_step_gb(8.0) == 10.0
    assert resolved.source["retry_memory_per_worker_gb"] == "step"


def test_the_retry_is_capped_so_one_process_fits_the_largest_node() -> None:
    history = [seen(2.0)] * 20 + [seen(30.0)]
    resolved = resolve(hint=HINT, history=history, overrides=NONE, node_memory_gb=16)
    assert resolved.retry_memory_per_worker_gb == 16 - 0.5


def test_values_are_whole_32_mib_steps() -> None:
    resolved = resolve(
        hint=HINT, history=[], overrides=ResourceOverrides(memory_per_worker_gb=1.001)
    )
    assert resolved.memory_per_worker_gb == 33 / 32


def test_a_report_becomes_an_observation_and_its_kills_are_a_kill_for_memory() -> None:
    now = datetime.now(UTC)
    report = WorkerReport(
        task="scan",
        worker="scan-w0",
        role="base",
        attempt=2,
        node="n1",
        processes=4,
        units_done=17,
        unit_seconds=UnitSeconds(count=17, median=3.5, max=9.0),
        peak_memory_per_process_gb=1.25,
        peak_memory_gb=4.0,
        memory_limit_gb=8.5,
        memory_per_worker_gb=2.0,
        oom_kills=1,
        exit_code=137,
        started_at=now,
        ended_at=now,
    )
    value = observation_of_report(report, run_id="r1")
    assert (value.run_id, value.worker, value.attempt, value.units_done) == ("r1", "scan-w0", 2, 17)
    assert (value.unit_seconds_median, value.peak_memory_gb, value.memory_limit_gb) == (3.5, 4, 8.5)
    assert value.oom_killed and value.from_report


observations = st.builds(
    ObservationValue,
    processes=st.integers(1, 32),
    units_done=st.integers(0, 100),
    peak_memory_per_process_gb=st.one_of(st.none(), st.floats(0.01, 64)),
    peak_memory_gb=st.one_of(st.none(), st.floats(0.01, 512)),
    memory_per_worker_gb=st.one_of(st.none(), st.floats(0.05, 64)),
    oom_killed=st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(observations, max_size=30),
    st.floats(0.05, 32),
    st.one_of(st.none(), st.floats(1, 512)),
    st.sampled_from(["process", "pod"]),
)
def test_the_retry_is_at_least_the_first_plus_a_step_unless_the_node_caps_it(
    history: list[ObservationValue], hint_gb: float, node_gb: float | None, rule: str
) -> None:
    """M9: retry ≥ first memory (+ a step when the node leaves room), ≤ the node."""
    hint = ResourceHint(memory_base_gb=0.5, memory_per_worker_gb=hint_gb)
    resolved = resolve(
        hint=hint,
        history=history,
        overrides=NONE,
        node_memory_gb=node_gb,
        memory_rule=rule,  # type: ignore[arg-type]
    )
    first, retry = resolved.memory_per_worker_gb, resolved.retry_memory_per_worker_gb
    assert retry is not None
    assert retry >= first
    room = None if node_gb is None else node_gb - 0.5
    if room is None or room >= first + retry_step_gb(first):
        assert retry >= first + retry_step_gb(first) - 1e-9
    if room is not None and first <= room:
        assert retry <= room

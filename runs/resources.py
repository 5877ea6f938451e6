"""Resource resolution: the type's hint, overridden by history, overridden by the workflow.

History is the resource observations of earlier attempts of the same type (and model):

- **memory per worker** (M13, the first attempt's): a high quantile of the observed peaks per
  process, with a margin. Which peak depends on what the harness enforces (`MemoryRule`):
  - `"pod"` (the default; what the harness enforces: only the pod's limit, the memory per
    worker is a share of the pod's budget — `simrun_harness.memory`): the pod's peak above
    its base, shared over its processes. Processes rarely peak together, so this asks for
    far less than the largest process each (see docs/benchmarks.md, "Sizing").
  - `"process"` (a harness that kills a unit process once it passes its memory per worker,
    as it did before, and still does without a known pod limit): each process must have room
    for the largest one: the peak of each attempt's largest unit process. Kept to compare.
  A kill for memory counts at least at the memory per worker it was given (censored: it
  needed more); a kill without a report is an observation at the pod's limit (C11).
- **retry memory per worker** (M9, the attempt after a kill for memory): above the highest
  peak of one process seen, at least the first memory per worker plus a step, and capped so
  one process and the base fit the largest node. The planner caps the pod's retry memory by
  the node it sized the pod for; at that cap the harness runs fewer processes.

Every value is rounded up to a whole 1/32 GiB (32 MiB): exact in binary, so sums of requests
compare exactly with node capacities, and Kubernetes quantities stay whole bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, TypeVar

from runs.plans import ObservationValue, PodShape, ResolvedResources
from runs.workflow import ResourceOverrides
from simrun_harness.plugin import ResourceHint
from simrun_harness.report import WorkerReport

GRANULES_PER_GB = 32
MEMORY_QUANTILE = 0.9
"""Which quantile of the observed peaks per process the first memory per worker covers."""
MEMORY_MARGIN = 0.12
"""Added above that quantile (a fraction of it)."""
RETRY_MARGIN = 0.10
"""The retry memory per worker is this fraction above the highest peak per process seen."""
RETRY_STEP_FRACTION = 0.25
RETRY_STEP_MIN_GB = 0.25
"""The retry memory per worker is at least the first + max(25 % of it, 0.25 GiB)."""

HINT, HISTORY, WORKFLOW, STEP = "hint", "history", "workflow", "step"
MemoryRule = Literal["process", "pod"]
PROCESS: MemoryRule = "process"
POD: MemoryRule = "pod"
T = TypeVar("T", float, int)


def round_up_gb(value: float) -> float:
    """`value` GiB rounded up to a whole 1/32 GiB (at least one), tolerant of float noise."""
    granules = max(1, math.ceil(value * GRANULES_PER_GB - 1e-9))
    return granules / GRANULES_PER_GB


def retry_step_gb(first_gb: float) -> float:
    """How much more than the first memory per worker an attempt after a kill gets at least."""
    return max(first_gb * RETRY_STEP_FRACTION, RETRY_STEP_MIN_GB)


def quantile(values: Sequence[float], q: float) -> float:
    """The `q` quantile of `values` by linear interpolation between order statistics."""
    if not values:
        raise ValueError("quantile of no values")
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def observation_of_report(report: WorkerReport, *, run_id: str | None = None) -> ObservationValue:
    """C11: what one attempt's report teaches; `oom_kills` above zero is a kill for memory."""
    return ObservationValue(
        run_id=run_id,
        worker=report.worker,
        attempt=report.attempt,
        processes=report.processes,
        units_done=report.units_done,
        unit_seconds_median=report.unit_seconds.median,
        peak_memory_per_process_gb=report.peak_memory_per_process_gb,
        peak_memory_gb=report.peak_memory_gb,
        memory_limit_gb=report.memory_limit_gb,
        memory_per_worker_gb=report.memory_per_worker_gb,
        oom_killed=report.oom_kills > 0,
        from_report=True,
    )


def attempt_memory(shape: PodShape, *, retried: bool) -> tuple[float, float, int]:
    """M9: the memory limit, memory per worker and processes of an attempt of a pod: the retry
    values when the attempt before it was killed for memory, else the first ones."""
    if retried:
        return shape.retry_memory_gb, shape.retry_per_worker_gb, shape.retry_processes
    return shape.memory_gb, shape.per_worker_gb, shape.processes


def observation_at_limit(
    *,
    shape: PodShape,
    retried: bool,
    worker: str,
    attempt: int,
    run_id: str | None = None,
) -> ObservationValue:
    """C11: a kill for memory without a report is an observation at the pod's limit: the pod
    peaked at its limit and its largest process at least at its memory per worker."""
    limit, per_worker, processes = attempt_memory(shape, retried=retried)
    return ObservationValue(
        run_id=run_id,
        worker=worker,
        attempt=attempt,
        processes=processes,
        peak_memory_per_process_gb=per_worker,
        peak_memory_gb=limit,
        memory_limit_gb=limit,
        memory_per_worker_gb=per_worker,
        oom_killed=True,
        from_report=False,
    )


def pod_share_gb(observation: ObservationValue, memory_base_gb: float) -> float | None:
    """The pod's peak above the base shared over its processes, None without the pod's peak."""
    if observation.peak_memory_gb is None:
        return None
    return (observation.peak_memory_gb - memory_base_gb) / max(1, observation.processes)


def attempt_peak_gb(
    observation: ObservationValue, memory_base_gb: float, *, rule: MemoryRule = POD
) -> float | None:
    """The peak per process of an attempt under `rule`, None without any memory figure.

    The figure of the rule (the largest process, or the pod's share), else the other one; a
    kill for memory counts at least at the memory per worker the attempt had.
    """
    share = pod_share_gb(observation, memory_base_gb)
    largest = observation.peak_memory_per_process_gb
    peak = (share if largest is None else largest) if rule == PROCESS else (share or largest)
    if observation.oom_killed and observation.memory_per_worker_gb is not None:
        peak = max(peak or 0.0, observation.memory_per_worker_gb)
    return None if peak is None else max(peak, 1 / GRANULES_PER_GB)


def highest_process_peak_gb(
    history: Sequence[ObservationValue], memory_base_gb: float
) -> float | None:
    """The highest peak of one process seen in `history` (any figure), None without any."""
    peaks = [
        peak
        for observation in history
        for peak in (
            attempt_peak_gb(observation, memory_base_gb, rule=PROCESS),
            attempt_peak_gb(observation, memory_base_gb, rule=POD),
        )
        if peak is not None
    ]
    return max(peaks) if peaks else None


def learned_memory_per_worker_gb(
    history: Sequence[ObservationValue], memory_base_gb: float, *, rule: MemoryRule = POD
) -> float | None:
    """M13: the first memory per worker history suggests, None without a usable observation."""
    peaks = [
        peak
        for observation in history
        if (peak := attempt_peak_gb(observation, memory_base_gb, rule=rule)) is not None
    ]
    if not peaks:
        return None
    return round_up_gb(quantile(peaks, MEMORY_QUANTILE) * (1 + MEMORY_MARGIN))


def retry_memory_per_worker_gb(
    *,
    first_gb: float,
    history: Sequence[ObservationValue],
    memory_base_gb: float,
    node_memory_gb: float | None = None,
) -> tuple[float, str]:
    """M9: the memory per worker after a kill for memory, and where it came from.

    Above the highest peak per process seen, at least `first_gb` plus a step, and capped so
    one process and the base fit `node_memory_gb` (never below `first_gb`).
    """
    value, source = round_up_gb(first_gb + retry_step_gb(first_gb)), STEP
    highest = highest_process_peak_gb(history, memory_base_gb)
    if highest is not None:
        above = round_up_gb(highest * (1 + RETRY_MARGIN))
        if above > value:
            value, source = above, HISTORY
    if node_memory_gb is not None:
        room = math.floor((node_memory_gb - memory_base_gb) * GRANULES_PER_GB) / GRANULES_PER_GB
        value = max(first_gb, min(value, room))
    return value, source


def merge_peak_gb(observation: ObservationValue, memory_base_gb: float) -> float | None:
    """A merge pod's peak: the pod's, else its process's above the base; a kill for memory
    counts at least at the limit it had (it needed more). None without any figure."""
    peak = observation.peak_memory_gb
    if peak is None and observation.peak_memory_per_process_gb is not None:
        peak = memory_base_gb + observation.peak_memory_per_process_gb
    if observation.oom_killed and observation.memory_limit_gb is not None:
        peak = max(peak or 0.0, observation.memory_limit_gb)
    return peak


def merge_memory_gb(
    *,
    merges: Sequence[ObservationValue],
    memory_base_gb: float,
    memory_per_worker_gb: float,
    node_memory_gb: float | None = None,
) -> tuple[float, float, str]:
    """The merge pod's first and retry memory, and where the first came from (see above)."""
    peaks = [p for m in merges if (p := merge_peak_gb(m, memory_base_gb)) is not None]
    if peaks:
        first, source = round_up_gb(quantile(peaks, MEMORY_QUANTILE) * (1 + MEMORY_MARGIN)), HISTORY
    else:
        first, source = round_up_gb(memory_base_gb + memory_per_worker_gb), HINT
    retry = round_up_gb(first + retry_step_gb(first))
    if peaks:
        retry = max(retry, round_up_gb(max(peaks) * (1 + RETRY_MARGIN)))
    if node_memory_gb is not None:
        retry = max(
            first, min(retry, math.floor(node_memory_gb * GRANULES_PER_GB) / GRANULES_PER_GB)
        )
    return first, retry, source


def _layered(
    name: str,
    source: dict[str, str],
    hint: T,
    *,
    history: T | None = None,
    workflow: T | None = None,
) -> T:
    """The value of the highest layer that has one (workflow, history, hint), noted in source."""
    if workflow is not None:
        source[name] = WORKFLOW
        return workflow
    if history is not None:
        source[name] = HISTORY
        return history
    source[name] = HINT
    return hint


def resolve(
    *,
    hint: ResourceHint,
    history: Sequence[ObservationValue],
    overrides: ResourceOverrides,
    node_memory_gb: float | None = None,
    memory_rule: MemoryRule = POD,
    merges: Sequence[ObservationValue] = (),
) -> ResolvedResources:
    """The resources of a task: `hint` ← `history` ← `overrides`, with where each came from.

    Args:
        hint: The type's resource hint.
        history: Observations of earlier attempts of the same type (and model), any order.
        overrides: The workflow's resources for the task; a value set there always wins.
        node_memory_gb: The memory of the largest node the task may use: caps the retry
            memory per worker. None leaves it uncapped (the planner still caps per node).
        memory_rule: Which peak per process the memory per worker covers (`MemoryRule`);
            "pod" matches the harness, "process" is kept for comparison (bench/sizing).
        merges: Observations of earlier merge pods of the same type (and model).
    """
    base, per_worker, source = _worker_memory(hint, history, overrides, memory_rule)
    retry, source["retry_memory_per_worker_gb"] = retry_memory_per_worker_gb(
        first_gb=per_worker, history=history, memory_base_gb=base, node_memory_gb=node_memory_gb
    )
    cores = _layered(
        "cores_per_process", source, hint.cores_per_process, workflow=overrides.cores_per_process
    )
    scratch = _layered("scratch_gb", source, hint.scratch_gb, workflow=overrides.scratch_gb)
    gpus = _layered("gpus", source, hint.gpus, workflow=overrides.gpus)
    if overrides.processes is not None:
        source["processes"] = WORKFLOW
    merge, merge_retry, source["merge_memory_gb"] = merge_memory_gb(
        merges=merges,
        memory_base_gb=base,
        memory_per_worker_gb=per_worker,
        node_memory_gb=node_memory_gb,
    )
    return ResolvedResources(
        cores_per_process=cores,
        memory_base_gb=base,
        memory_per_worker_gb=per_worker,
        scratch_gb=scratch,
        gpus=gpus,
        processes=overrides.processes,
        retry_memory_per_worker_gb=retry,
        source=source,
        merge_memory_gb=merge,
        merge_retry_memory_gb=merge_retry,
    )


def _worker_memory(
    hint: ResourceHint,
    history: Sequence[ObservationValue],
    overrides: ResourceOverrides,
    rule: MemoryRule,
) -> tuple[float, float, dict[str, str]]:
    """The base memory and the memory per worker, each rounded up, and where each came from."""
    source: dict[str, str] = {}
    base = _layered(
        "memory_base_gb", source, hint.memory_base_gb, workflow=overrides.memory_base_gb
    )
    base = round_up_gb(base) if base > 0 else 0.0
    learned = learned_memory_per_worker_gb(history, base, rule=rule)
    per_worker = _layered(
        "memory_per_worker_gb",
        source,
        hint.memory_per_worker_gb,
        history=learned,
        workflow=overrides.memory_per_worker_gb,
    )
    return base, round_up_gb(per_worker), source

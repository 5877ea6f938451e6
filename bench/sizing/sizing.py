"""Benchmark of resource learning: memory requested ÷ used, and retries for memory.

A synthetic split task type whose units' true peak memory is skewed (a lognormal working set
on top of the interpreter) runs 20 times in a row on a simulated cluster, sized three ways in
the same process on the same units:

1. by the static hint alone, with the harness as it is (only the pod's limit enforced);
2. learned by the real `runs.resources.resolve` with rule "process" and
   `runs.planner.plan_task` from the observations of the runs before it, with the harness as
   it was (a unit process over its memory per worker killed; a unit that killed an attempt
   back to pending for any pod) — for comparison;
3. learned with rule "pod" (the default, what the submission uses), with the harness as it
   is: when a pod nears its limit (`simrun_harness.memory.pod_over_limit`) its largest unit
   process is killed, and that unit is claimed again only by an attempt with more memory per
   worker (the retry), or by the coordinator alone as a last resort.

Observations come from real `WorkerReport`s through `observation_of_report`. A killed attempt
exits 137, gives its claims back at once and is retried at the retry memory with
`PodShape.retry_processes` processes. The pod's memory is the harness plus its running unit
processes.

Figures, per attempt, summed over attempts:
- pod waste: the pod's memory limit ÷ its peak memory;
- process waste: the memory per worker ÷ the peak of the attempt's largest process;
- retries: attempts killed for memory ÷ pods planned.

The 20 runs are repeated over independent replicas (other unit draws) so the retry rate, a
small proportion, is measured over a thousand pods.

    .venv/bin/python bench/sizing/sizing.py [--replicas 12] [--runs 20] [--sigma 0.3]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from runs.planner import plan_task
from runs.plans import Node, ObservationValue, PodShape
from runs.resources import MemoryRule, attempt_memory, observation_of_report, resolve
from runs.workflow import ResourceOverrides
from simrun_harness.memory import GB, pod_over_limit
from simrun_harness.plugin import ResourceHint
from simrun_harness.report import UnitSeconds, WorkerReport

NODES = [Node(f"node-{i}", 16, 64) for i in range(6)]
HINT = ResourceHint(cores_per_process=1, memory_base_gb=0.5, memory_per_worker_gb=4.0)
UNITS = 1200
INTERPRETER_GB = 0.15  # an idle unit process
HARNESS_GB = 0.12  # the worker's main process
WORK_MEDIAN_GB = 1.0  # the working set of a unit: lognormal, right-skewed
WORK_SIGMA = 0.3
UNIT_MEDIAN_S = 20.0
UNIT_SIGMA = 0.3
HISTORY_LIMIT = 200  # as runs.observations.HISTORY_LIMIT
WARM_UP = 5  # runs of history before the goal applies
Harness = Literal["pod", "process"]


@dataclass
class Attempt:
    """One attempt of one pod: what it was given and what it used."""

    limit_gb: float
    per_worker_gb: float
    processes: int
    peak_gb: float = HARNESS_GB
    peak_process_gb: float = 0.0
    unit_seconds: list[float] = field(default_factory=list)
    killed: bool = False
    again: bool = False  # killed by a unit that had killed an attempt before


@dataclass
class RunResult:
    """What one run requested, used and retried."""

    per_worker_gb: float
    pods: int
    processes: int
    attempts: list[Attempt]
    failed: int  # 1 when a pod was killed again at the retry memory (the run failed)

    @property
    def retries(self) -> int:
        return sum(a.killed for a in self.attempts)

    def waste(self) -> tuple[float, float]:
        pod = sum(a.limit_gb for a in self.attempts) / sum(a.peak_gb for a in self.attempts)
        per_process = sum(a.per_worker_gb for a in self.attempts) / sum(
            a.peak_process_gb for a in self.attempts
        )
        return pod, per_process


def draw_units(rng: random.Random, sigma: float) -> list[tuple[float, float]]:
    """The units of a run: (peak memory of its process in GiB, seconds)."""
    return [
        (
            INTERPRETER_GB + rng.lognormvariate(0.0, sigma) * WORK_MEDIAN_GB,
            rng.lognormvariate(0.0, UNIT_SIGMA) * UNIT_MEDIAN_S,
        )
        for _ in range(UNITS)
    ]


def simulate(
    shape: PodShape, pods: int, units: list[tuple[float, float]], *, harness: Harness
) -> RunResult:
    """Run the units on `pods` pods of `shape`: an event loop over unit ends.

    `harness` "pod" (the harness now): when a pod nears its limit (`pod_over_limit`) its
    largest unit process is killed; that unit is marked and claimed again only by an attempt
    with more memory per worker, or by the coordinator (pod 0) alone as a last resort.
    "process" (the harness before): a unit process over its memory per worker is killed, and
    the pod at its limit; the units of a killed attempt go back to pending for any pod.
    """
    pending = deque(range(len(units)))
    attempts: list[Attempt] = []
    current: list[Attempt] = []
    running: list[dict[int, int]] = [{} for _ in range(pods)]  # pod → slot → unit
    generation = [0] * pods
    at_retry = [False] * pods
    events: list[tuple[float, int, int, int, int]] = []  # time, pod, generation, slot, unit
    failed = 0
    killers: set[int] = set()  # units whose start killed an attempt
    marks: dict[int, float] = {}  # unit → the memory per worker of the attempt it broke

    def start_attempt(pod: int, now: float, retried: bool) -> None:
        limit, per_worker, processes = attempt_memory(shape, retried=retried)
        current_attempt = Attempt(limit, per_worker, processes)
        attempts.append(current_attempt)
        if pod < len(current):
            current[pod] = current_attempt
        else:
            current.append(current_attempt)
        generation[pod] += 1
        at_retry[pod] = retried
        running[pod] = {}
        for slot in range(processes):
            if not start_unit(pod, slot, now):
                break

    def take(pod: int) -> int | None:
        """The first pending unit this pod may claim (marks need more memory per worker)."""
        per_worker = current[pod].per_worker_gb
        for index, unit in enumerate(pending):
            if unit not in marks or per_worker > marks[unit] + 1e-9:
                del pending[index]
                return unit
        return None

    def start_unit(pod: int, slot: int, now: float, unit: int | None = None) -> bool:
        """Give a free process a unit; False when none is claimable or the pod was killed."""
        if unit is None:
            unit = take(pod)
        if unit is None:
            return False
        attempt = current[pod]
        memory, seconds = units[unit]
        running[pod][slot] = unit
        attempt.peak_process_gb = max(attempt.peak_process_gb, memory)
        total = HARNESS_GB + sum(units[u][0] for u in running[pod].values())
        attempt.peak_gb = max(attempt.peak_gb, min(total, attempt.limit_gb))
        if harness == "pod":
            if pod_over_limit(total * GB, attempt.limit_gb * GB):
                kill(pod, now, max(running[pod].values(), key=lambda u: units[u][0]))
                return False
        elif memory > attempt.per_worker_gb or total > attempt.limit_gb:
            kill(pod, now, unit)
            return False
        heapq.heappush(events, (now + seconds, pod, generation[pod], slot, unit))
        return True

    def kill(pod: int, now: float, unit: int) -> None:
        nonlocal failed
        attempt = current[pod]
        attempt.killed = True
        attempt.again = unit in killers
        killers.add(unit)
        if harness == "pod":
            marks[unit] = max(marks.get(unit, 0.0), attempt.per_worker_gb)
        pending.extendleft(sorted(running[pod].values(), reverse=True))
        if at_retry[pod]:  # a second kill at the retry memory fails the run: it stops here
            failed += 1
            pending.clear()
            events.clear()
            return
        start_attempt(pod, now, retried=True)

    def last_resort(now: float) -> bool:
        """Nothing runs and only marked units are pending: the coordinator takes one."""
        if any(running[pod] for pod in range(pods)) or not pending:
            return False
        if start_unit(0, 0, now):
            return True
        return start_unit(0, 0, now, pending.popleft()) or bool(events)

    for pod in range(pods):
        start_attempt(pod, 0.0, retried=False)
    now = 0.0
    while events or last_resort(now):
        now, pod, gen, slot, unit = heapq.heappop(events)
        if gen != generation[pod]:
            continue  # the attempt that ran it was killed
        del running[pod][slot]
        current[pod].unit_seconds.append(units[unit][1])
        start_unit(pod, slot, now)
    return RunResult(shape.per_worker_gb, pods, shape.processes, attempts, failed)


def reports(result: RunResult, run: int) -> list[ObservationValue]:
    """The observations the run leaves, through real reports."""
    now = datetime.now(UTC)
    found = []
    for index, attempt in enumerate(result.attempts):
        report = WorkerReport(
            task="scan",
            worker=f"scan-w{index}",
            role="base" if index == 0 else "extra",
            attempt=0,
            node="simulated",
            processes=attempt.processes,
            units_done=len(attempt.unit_seconds),
            unit_seconds=UnitSeconds.of(attempt.unit_seconds),
            peak_memory_per_process_gb=attempt.peak_process_gb,
            peak_memory_gb=attempt.peak_gb,
            memory_limit_gb=attempt.limit_gb,
            memory_per_worker_gb=attempt.per_worker_gb,
            oom_kills=int(attempt.killed),
            exit_code=137 if attempt.killed else 0,
            started_at=now,
            ended_at=now,
        )
        found.append(observation_of_report(report, run_id=f"run-{run}"))
    return found


@dataclass(frozen=True)
class Strategy:
    """How a sequence of runs is sized and what the harness enforces."""

    name: str
    learns: bool
    rule: MemoryRule
    harness: Harness


STRATEGIES = (
    Strategy("static hint (harness enforces the pod's limit)", False, "pod", "pod"),
    Strategy(
        "learned, rule process (harness as before: caps each process)", True, "process", "process"
    ),
    Strategy(
        "learned, rule pod, the default (harness enforces the pod's limit)", True, "pod", "pod"
    ),
)


def size(history: list[ObservationValue], rule: MemoryRule) -> tuple[PodShape, int]:
    """The real resolution and plan of the task from `history` (newest first)."""
    resources = resolve(
        hint=HINT,
        history=history[:HISTORY_LIMIT],
        overrides=ResourceOverrides(),
        node_memory_gb=max(n.memory_gb for n in NODES),
        memory_rule=rule,
    )
    plan = plan_task(units=UNITS, resources=resources, nodes=NODES, split="auto", tier="person")
    return plan.shape, plan.pods


def replica(seed: int, runs: int, sigma: float = WORK_SIGMA) -> list[list[RunResult]]:
    """`runs` successive runs per strategy, all on the same units; results by strategy."""
    rng = random.Random(seed)
    histories: list[list[ObservationValue]] = [[] for _ in STRATEGIES]
    results: list[list[RunResult]] = [[] for _ in STRATEGIES]
    for run in range(runs):
        units = draw_units(rng, sigma)
        for index, strategy in enumerate(STRATEGIES):
            shape, pods = size(histories[index] if strategy.learns else [], strategy.rule)
            result = simulate(shape, pods, units, harness=strategy.harness)
            results[index].append(result)
            histories[index] = reports(result, run) + histories[index]  # newest first
    return results


def summary(sequences: list[list[RunResult]]) -> dict[str, float]:
    """Waste and retry rate over every run after the warm-up, over all replicas."""
    after = [r for seq in sequences for r in seq[WARM_UP:]]
    attempts = [a for r in after for a in r.attempts]
    pods = sum(r.pods for r in after)
    return {
        "pod_waste": sum(a.limit_gb for a in attempts) / sum(a.peak_gb for a in attempts),
        "process_waste": sum(a.per_worker_gb for a in attempts)
        / sum(a.peak_process_gb for a in attempts),
        "retry_rate": sum(r.retries for r in after) / pods,
        "repeat_kills": sum(a.again for a in attempts),
        "failed_runs": sum(r.failed for r in after),
        "pods": pods,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", type=int, default=12)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--sigma", type=float, default=WORK_SIGMA, help="skew of the units")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    by_strategy: list[list[list[RunResult]]] = [[] for _ in STRATEGIES]
    for index in range(args.replicas):
        for found, results in zip(
            by_strategy, replica(args.seed * 1000 + index, args.runs, args.sigma), strict=True
        ):
            found.append(results)
    print(
        f"{len(NODES)} nodes of {NODES[0].cores:g} cores / {NODES[0].memory_gb:g} GiB, {UNITS}"
        f" units a run; a unit's process peaks at {INTERPRETER_GB} + lognormal(median"
        f" {WORK_MEDIAN_GB}, sigma {args.sigma}) GiB; hint {HINT.memory_per_worker_gb} GiB per"
        f" worker; {args.replicas} replicas of {args.runs} runs"
    )
    print("per run (mean over replicas): GiB per worker, pod waste, retries")
    print("run  " + "  ".join(f"{'strategy ' + str(i + 1):>24}" for i in range(len(STRATEGIES))))
    for run in range(args.runs):
        cells = []
        for sequences in by_strategy:
            rows = [seq[run] for seq in sequences]
            per_worker = statistics.mean(r.per_worker_gb for r in rows)
            waste = statistics.mean(r.waste()[0] for r in rows)
            retries = sum(r.retries for r in rows) / sum(r.pods for r in rows)
            cells.append(f"{per_worker:6.2f} {waste:6.2f} {retries:7.1%}")
        print(f"{run + 1:>3}  " + "  ".join(f"{c:>24}" for c in cells))
    figures = {}
    for index, (strategy, sequences) in enumerate(zip(STRATEGIES, by_strategy, strict=True)):
        values = summary(sequences)
        figures[strategy.name] = values
        print(
            f"strategy {index + 1}, {strategy.name}, runs {WARM_UP + 1}-{args.runs}:"
            f" pod waste {values['pod_waste']:.2f}, process waste"
            f" {values['process_waste']:.2f}, retries {values['retry_rate']:.1%} of"
            f" {values['pods']} pods ({values['repeat_kills']} by a unit that had killed"
            f" before), failed runs {values['failed_runs']}"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=2)


if __name__ == "__main__":
    main()

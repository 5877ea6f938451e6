"""Runs side by side (S14): settings, sources, environment, durations, resources and outputs.

The comparison is a list of rows, one per (section, key), with one value per run in the
order asked and whether the values differ, so a page or an agent can show only differences.
Nested values are flattened to dotted keys (`scan.settings.n_points`). Outputs are compared
by content: one row per output file (`<task>/<path>`), its SHA-256 in each run (None where a
run has no such file), so a run made again from a crate shows whether it made the same bytes.
The outputs of all the runs are hashed within SIMRUN_COMPARE_MAX_S (`output_digests`); a run
not hashed whole has a row `(not compared)` saying why, `(not hashed)` for each of its files
not hashed (never counted as differing), and is named in `not_compared`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Avg, Count, Max, Q

from runs.models import ResourceObservation, Run, Snapshot
from runs.refusals import RunNotFound
from runs.selectors.output_digests import OutputDigests, deadline, output_digests
from runs.selectors.runs_list import RunItem, run_item, runs_with_details

MAX_RUNS = 20
SECTIONS = ("run", "settings", "sources", "environment", "durations", "resources", "outputs")
NOT_COMPARED = "(not compared)"
NOT_HASHED = "(not hashed)"


@dataclass(frozen=True)
class CompareRow:
    section: str
    key: str
    values: list[Any]
    differs: bool


@dataclass(frozen=True)
class Comparison:
    runs: list[RunItem]
    rows: list[CompareRow]
    not_compared: dict[str, str]
    """The runs whose outputs were not all compared, and why."""


def _flatten(value: Any, prefix: str, into: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key in sorted(value):
            _flatten(value[key], f"{prefix}.{key}" if prefix else str(key), into)
    else:
        into[prefix] = value


def _seconds(start: Any, end: Any) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds(), 3)


def _run_values(run: Run) -> dict[str, Any]:
    return {
        "workflow": run.name,
        "state": run.state,
        "owner": run.principal.name,
        "submitted_by": run.owner.name,
        "tier": run.tier,
        "group": run.group,
        "reserve": run.reserve,
        "tasks": len(run.tasks.all()),
    }


def _settings_values(run: Run) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for task in run.tasks.all():
        found[f"{task.task_id}.type"] = task.type
        _flatten(task.settings, f"{task.task_id}.settings", found)
        _flatten(task.inputs, f"{task.task_id}.inputs", found)
    return found


def _source_values(run: Run, snapshots: dict[str, Snapshot]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for index, digest in enumerate(run.sources or []):
        key = str(digest.get("digest", "")) if isinstance(digest, dict) else str(digest)
        label = "model" if index == 0 else f"source{index}"
        found[f"{label}.digest"] = key
        snapshot = snapshots.get(key)
        if snapshot is not None:
            found[f"{label}.path"] = snapshot.source_path
            found[f"{label}.git_remote"] = snapshot.git_remote
            found[f"{label}.git_commit"] = snapshot.git_commit
            found[f"{label}.git_dirty"] = snapshot.git_dirty
    return found


def _duration_values(run: Run) -> dict[str, Any]:
    found: dict[str, Any] = {
        "run.queued_s": _seconds(run.created_at, run.started_at),
        "run.total_s": _seconds(run.created_at, run.ended_at),
        "run.running_s": _seconds(run.started_at, run.ended_at),
    }
    for task in run.tasks.all():
        found[f"{task.task_id}.s"] = _seconds(task.started_at, task.ended_at)
    return found


def _resource_values(run: Run, observed: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for task in run.tasks.all():
        _flatten(task.resources, f"{task.task_id}.resources", found)
        plan = task.plan or {}
        found[f"{task.task_id}.plan.pods"] = plan.get("pods")
        _flatten(plan.get("shape", {}), f"{task.task_id}.plan.shape", found)
        for name, value in observed.get((run.id, task.task_id), {}).items():
            found[f"{task.task_id}.observed.{name}"] = value
    return found


def _output_values(runs: list[Run]) -> list[OutputDigests]:
    """The runs' output digests, all hashed within one deadline; an ended run's are kept."""
    until = deadline()
    return [output_digests(run.pk, until=until, keep=run.ended) for run in runs]


def _outputs(found: OutputDigests, every: set[str]) -> dict[str, Any]:
    """A run's outputs section: its digests, and where they are not all taken, why, and
    `NOT_HASHED` for every other file of the runs compared."""
    values: dict[str, Any] = dict(sorted(found.digests.items()))
    if found.not_compared:
        values[NOT_COMPARED] = found.not_compared
        values |= {key: NOT_HASHED for key in sorted(every - found.digests.keys())}
    return values


def compare_runs(run_ids: list[str]) -> Comparison:
    """Compare 2 to MAX_RUNS runs, in the order given.

    Raises:
        ValueError: fewer than two runs, more than MAX_RUNS or an id given twice.
        RunNotFound: an unknown run (every unknown id is named).
    """
    if len(run_ids) < 2 or len(run_ids) > MAX_RUNS:
        raise ValueError(f"runs: give 2 to {MAX_RUNS} run ids, not {len(run_ids)}")
    if len(set(run_ids)) != len(run_ids):
        raise ValueError("runs: a run is named twice")
    found = {run.id: run for run in runs_with_details().filter(pk__in=run_ids)}
    missing = [r for r in run_ids if r not in found]
    if missing:
        raise RunNotFound(f"no run {', '.join(repr(m) for m in missing)}")
    runs = [found[r] for r in run_ids]
    digests = {
        str(d.get("digest", "")) if isinstance(d, dict) else str(d)
        for run in runs
        for d in run.sources or []
    }
    snapshots = {s.digest: s for s in Snapshot.objects.filter(digest__in=digests)}
    observed: dict[tuple[str, str], dict[str, Any]] = {}
    rows = (
        ResourceObservation.objects.filter(run_id__in=run_ids)
        .values("run_id", "task_id")
        .annotate(
            attempts=Count("id"),
            peak_memory_gb=Max("peak_memory_gb"),
            peak_memory_per_process_gb=Max("peak_memory_per_process_gb"),
            unit_seconds_mean=Avg("unit_seconds_median"),
            oom_kills=Count("id", filter=Q(oom_killed=True)),
        )
        .order_by()
    )
    for row in rows:
        values: dict[str, Any] = dict(row)
        key = (str(values.pop("run_id")), str(values.pop("task_id")))
        observed[key] = values
    digested = _output_values(runs)
    every = {key for found in digested for key in (*found.digests, *found.left)}
    per_run = [
        {
            "run": _run_values(run),
            "settings": _settings_values(run),
            "sources": _source_values(run, snapshots),
            "environment": _flattened(run.environment or {}),
            "durations": _duration_values(run),
            "resources": _resource_values(run, observed),
            "outputs": _outputs(found, every),
        }
        for run, found in zip(runs, digested, strict=True)
    ]
    not_compared = {run.id: f.not_compared for run, f in zip(runs, digested, strict=True)}
    not_compared = {run_id: why for run_id, why in not_compared.items() if why}
    return Comparison([run_item(r) for r in runs], _rows(per_run), not_compared)


def _flattened(value: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    _flatten(value, "", found)
    return {k: v for k, v in found.items() if k}


def _rows(per_run: list[dict[str, dict[str, Any]]]) -> list[CompareRow]:
    rows = []
    for section in SECTIONS:
        keys: list[str] = []
        for values in per_run:
            keys.extend(k for k in values[section] if k not in keys)
        for key in keys:
            column = [values[section].get(key) for values in per_run]
            known = [v for v in column if v != NOT_HASHED]
            differs = any(v != known[0] for v in known[1:])
            rows.append(CompareRow(section, key, column, differs))
    return rows

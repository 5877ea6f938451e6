"""What a reconcile reads of a task's reports in the run store: when its pods worked, the
kills of the out-of-memory killer they counted (C8), and why an attempt that failed the task
failed. Each is read only when the backend's status says the derivation needs it."""

from __future__ import annotations

from datetime import datetime

from runs.controller import rules
from runs.controller.advice import memory_cause
from runs.ports import BackendStatus
from runs.store import reports, task_paths
from simrun_harness import store_reads
from simrun_harness.layout import TaskPaths, report_name
from simrun_harness.ledger import SEP
from simrun_harness.report import task_report


def reported_span(run_id: str, task_id: str) -> tuple[datetime | None, datetime | None]:
    """The first start and the last end among the reports of a task's pods."""
    found = [report for _, report in reports(task_paths(run_id, task_id))]
    if not found:
        return None, None
    return min(r.started_at for r in found), max(r.ended_at for r in found)


def failure_causes(
    run_id: str, task_id: str, reasons: tuple[rules.Verdict | str, ...]
) -> dict[str, str]:
    """Why each attempt that failed the task failed (by pod): from its report, or its exit
    code; read only for verdicts that name an attempt."""
    causes = {}
    for verdict in reasons:
        if isinstance(verdict, rules.Verdict) and verdict.attempt is not None:
            causes[verdict.pod] = _cause(run_id, task_id, verdict)
    return causes


def _cause(run_id: str, task_id: str, verdict: rules.Verdict) -> str:
    """Why the attempt that failed a task failed: from its report, or its exit code."""
    paths = task_paths(run_id, task_id)
    report = None
    if verdict.attempt is not None:
        try:
            report = task_report(paths, report_name(verdict.pod, verdict.attempt))
        except (OSError, ValueError):
            report = None  # no report: the store refused it, or the pod died before
    error = report.error if report is not None else None
    if verdict.memory and report is not None:
        return memory_cause(
            unit=error.unit if error else None,
            value=error.value if error else None,
            peak_gb=report.peak_memory_per_process_gb,
            limit_gb=report.memory_limit_gb,
            per_worker_gb=report.memory_per_worker_gb,
        )
    if verdict.memory:  # killed with no report written (the pod's limit, outside the harness)
        held = _claimed_by(paths, f"{verdict.pod}{SEP}{verdict.attempt}")
        return memory_cause(
            unit=", ".join(held) or None,
            value=None,
            peak_gb=None,
            limit_gb=verdict.limit_gb,
            per_worker_gb=None,
        )
    return rules.failure_cause(
        verdict,
        error=error.message if error else None,
        unit=error.unit if error else None,
        task_dir=str(paths.root),
    )


def _claimed_by(paths: TaskPaths, holder: str) -> list[str]:
    """The units a holder still had claimed (the pod was killed holding them)."""
    try:
        names = store_reads.names(paths.store_root, paths.claimed, limit=10_000)
    except OSError:
        return []
    return sorted(n.split(SEP, 1)[0] for n in names if n.split(SEP, 1)[-1] == holder)


def reported_kills(
    run_id: str, task: rules.TaskRecord, status: BackendStatus
) -> dict[str, dict[int, int]]:
    """Kills of the OOM killer counted in reports, per pod and attempt (C8); read only when
    an attempt's exit 137 is not explained by the backend."""
    found: dict[str, dict[int, int]] = {}
    if not rules.wants_reported_kills(task, status):
        return found
    for _, report in reports(task_paths(run_id, task.task_id)):
        if report.oom_kills:
            found.setdefault(report.worker, {})[report.attempt] = report.oom_kills
    return found

"""`simrun-merge`: merge the unit outputs of a split task into `out/`, marker last.

The same merge runs inside the coordinator when SIMRUN_COORDINATOR_MERGES=1. The plugin's
`merge` runs in a pool process (its memory is measured, a kill is seen); its output is
published by `output.publish_output`, so a half merge is never taken for a whole one.
"""

from __future__ import annotations

import logging
import os
from typing import NoReturn

from simrun_harness import store_reads
from simrun_harness.attempt import Attempt
from simrun_harness.config import single_config
from simrun_harness.console import run_console
from simrun_harness.exits import EXIT_FAILED, EXIT_OK
from simrun_harness.jobs import Job
from simrun_harness.ledger import ledger_exists, unit_names
from simrun_harness.ledger_reads import read_total
from simrun_harness.output import is_published, prepare_output, publish_output
from simrun_harness.plugin import SplitTaskType
from simrun_harness.pool import ProcessPool
from simrun_harness.report import ReportError
from simrun_harness.single_job import load_of_kind, one_process
from simrun_harness.taskfile import LoadedTask
from simrun_harness.termination import StopSignal

log = logging.getLogger("simrun")


def merge_output(
    task: LoadedTask, pool: ProcessPool, stop: StopSignal, attempt: Attempt, token: str
) -> int:
    """Merge the units of a complete ledger into `out/`; returns the exit code."""
    paths = task.paths
    if is_published(paths):
        log.info("%s: out/ is already merged; nothing to do", attempt.worker)
        return EXIT_OK
    if not ledger_exists(paths):
        attempt.error = ReportError(message="the task has no ledger: nothing to merge")
        return EXIT_FAILED
    names = unit_names(read_total(paths))
    done = set(os.listdir(paths.done))
    # a unit's output reached through a link (a unit's code may make one) is no input
    root = paths.store_root
    missing = [n for n in names if n not in done or not store_reads.is_dir(root, paths.unit_dir(n))]
    if missing:
        attempt.error = ReportError(
            message=f"{len(missing)} of {len(names)} units are not done (first: {missing[0]})"
        )
        return EXIT_FAILED
    tmp = prepare_output(paths, token)
    job = Job("merge", out=str(tmp), unit_dirs=tuple(str(paths.unit_dir(n)) for n in names))
    log.info("%s: merging %d units", attempt.worker, len(names))
    code = attempt.run_job(pool, job, stop, enforce=False)
    if code != EXIT_OK:
        return code
    publish_output(paths, tmp, {"worker": attempt.worker, "units": len(names)})
    log.info("%s: merged %d units into %s", attempt.worker, len(names), paths.out)
    return EXIT_OK


def _main() -> int:
    stop = StopSignal()
    config = single_config()
    common = config.common
    task_id = common.task_dir.name
    worker = config.worker or f"{task_id}-merge"
    attempt = Attempt(common, task_id, worker, "merge", config.memory_per_worker_gb)
    task = load_of_kind(attempt, SplitTaskType, "is not splittable")
    if is_published(task.paths):
        log.info("%s: out/ is already merged; nothing to do", worker)
        return attempt.finish(EXIT_OK)
    pool, token = one_process(attempt, task)
    code = EXIT_FAILED
    try:
        code = merge_output(task, pool, stop, attempt, token)
    finally:
        pool.shutdown(kill=code != EXIT_OK)
    return attempt.finish(code)


def main() -> NoReturn:
    """Console script `simrun-merge`."""
    run_console("simrun-merge", _main)

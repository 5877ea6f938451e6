"""`simrun-exec`: run an unsplit plugin task once, with its settings and inputs, into `out/`.

The type's `run` works in a pool process (measured, its death seen) on a private directory
that is published as `out/` with the marker last, like a merge. A task already published is
not run again. (The service's built-in `command` type is not run by the harness.)
"""

from __future__ import annotations

import logging
from typing import NoReturn

from simrun_harness.attempt import Attempt
from simrun_harness.config import single_config
from simrun_harness.console import run_console
from simrun_harness.exits import EXIT_FAILED, EXIT_OK
from simrun_harness.jobs import Job
from simrun_harness.output import is_published, prepare_output, publish_output
from simrun_harness.plugin import UnsplitTaskType
from simrun_harness.reuse import link_output, store_root_of
from simrun_harness.single_job import load_of_kind, one_process
from simrun_harness.termination import StopSignal

log = logging.getLogger("simrun")


def _main() -> int:
    stop = StopSignal()
    config = single_config()
    common = config.common
    task_id = common.task_dir.name
    attempt = Attempt(
        common, task_id, config.worker or task_id, "exec", config.memory_per_worker_gb
    )
    task = load_of_kind(attempt, UnsplitTaskType, "is splittable: not for exec")
    if is_published(task.paths):
        log.info("%s: out/ is already complete; nothing to do", attempt.worker)
        return attempt.finish(EXIT_OK)
    pool, token = one_process(attempt, task)
    code = EXIT_FAILED
    try:
        tmp = prepare_output(task.paths, token)
        if link_output(task.paths, store_root_of(common.run_dir), tmp):
            log.info("%s: reused the output of an earlier run", attempt.worker)
            publish_output(task.paths, tmp, {"worker": attempt.worker, "reused": True})
            code = EXIT_OK
            return attempt.finish(code)
        log.info("%s: running %s", attempt.worker, task.file.type)
        code = attempt.run_job(pool, Job("run", out=str(tmp)), stop, enforce=False)
        if code == EXIT_OK:
            publish_output(task.paths, tmp, {"worker": attempt.worker})
    finally:
        pool.shutdown(kill=code != EXIT_OK)
    return attempt.finish(code)


def main() -> NoReturn:
    """Console script `simrun-exec`."""
    run_console("simrun-exec", _main)

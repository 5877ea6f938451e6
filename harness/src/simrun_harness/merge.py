"""`simrun-merge`: merge the unit outputs of a split task into `out/`, marker last.

The same merge runs inside the coordinator when SIMRUN_COORDINATOR_MERGES=1. The plugin's
`merge` runs in a pool process (its memory is measured, a kill is seen); its output is
published by `output.publish_output`, so a half merge is never taken for a whole one.
"""

from __future__ import annotations

import logging
import os
import re
from typing import NoReturn

from simrun_harness import store_reads
from simrun_harness.attempt import Attempt
from simrun_harness.config import single_config
from simrun_harness.console import run_console
from simrun_harness.exits import EXIT_FAILED, EXIT_OK
from simrun_harness.jobs import Job
from simrun_harness.layout import TaskPaths
from simrun_harness.ledger import ledger_exists, unit_bits
from simrun_harness.ledger_reads import UnitNames, read_total
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
    names = UnitNames(read_total(paths))
    missing, first = _not_done(paths, names)
    if missing:
        attempt.error = ReportError(
            message=f"{missing} of {len(names)} units are not done (first: {first})"
        )
        return EXIT_FAILED
    tmp = prepare_output(paths, token)
    job = Job("merge", out=str(tmp), units=str(paths.units), unit_count=len(names))
    log.info("%s: merging %d units", attempt.worker, len(names))
    code = attempt.run_job(pool, job, stop, enforce=False)
    if code != EXIT_OK:
        return code
    publish_output(paths, tmp, {"worker": attempt.worker, "units": len(names)})
    log.info("%s: merged %d units into %s", attempt.worker, len(names), paths.out)
    return EXIT_OK


def _not_done(paths: TaskPaths, names: UnitNames) -> tuple[int, str | None]:
    """How many units are not done, and the first: not in `done/`, or their output no
    directory (one reached through a link, which a unit's code may make, is no input).

    Two listings, each read as a bit per unit (`done/`, and the directories of `units/`
    named as the units are), then compared as whole numbers: no look per unit, which at
    100,000 units was seconds of the coordinator's time with every core idle."""
    done, _, _ = unit_bits(paths.done)
    both = int.from_bytes(done, "little") & int.from_bytes(_output_bits(paths, names), "little")
    every = (1 << len(names)) - 1
    absent = every & ~both
    if not absent:
        return 0, None
    return absent.bit_count(), names[(absent & -absent).bit_length() - 1]


def _output_bits(paths: TaskPaths, names: UnitNames) -> bytearray:
    """A bit per unit whose output is a directory in `units/` (never a link), from one
    listing of `units/` opened without following a link; none when it is no directory."""
    bits = bytearray((len(names) + 7) // 8)
    try:
        with (
            store_reads.directory(paths.store_root, paths.units) as fd,
            os.scandir(fd) as entries,
        ):
            for entry in entries:
                name = entry.name
                if len(name) != names.width + 1 or not _UNIT.fullmatch(name):
                    continue
                index = int(name[1:])
                if index < len(names) and entry.is_dir(follow_symlinks=False):
                    bits[index >> 3] |= 1 << (index & 7)
    except FileNotFoundError:  # no units/, or one that is a link (NotInStore)
        pass
    return bits


_UNIT = re.compile(r"u[0-9]+")


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

"""The progress file of a task: one JSON object per line, appended by every worker.

    {"event": "unit_done", "time": "2025-01-01T10:00:00.123+00:00", "worker": "scan-w1",
     "unit": "u000042", "seconds": 1.25, "peak_memory_gb": 0.31}

Lines are written whole, a batch of them by a single `write` on a file opened with
O_APPEND. On a local file system lines never interleave; over NFS, appends from several
machines are not atomic, so the reader skips a line it cannot parse. The ledger, not this
file, is the truth about which units are done; the progress file is for people watching
(progress bars, rates, the last unit).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from simrun_harness import store_reads
from simrun_harness.layout import TaskPaths

UNIT_DONE = "unit_done"
CLAIMS_RETURNED = "claims_returned"


class ProgressEvent(BaseModel):
    """One line of the progress file; `unit_done` lines carry every optional field."""

    model_config = ConfigDict(extra="ignore")

    event: str
    time: datetime
    worker: str
    unit: str | None = None
    seconds: float | None = None
    peak_memory_gb: float | None = None
    units: list[str] | None = None
    holder: str | None = None


def parse_progress_line(line: str) -> ProgressEvent | None:
    """One parsed line, None for a blank, torn or foreign line."""
    line = line.strip()
    if not line:
        return None
    try:
        return ProgressEvent.model_validate_json(line)
    except ValidationError:
        return None


def read_progress(path: Path) -> Iterator[ProgressEvent]:
    """Every parseable event of a progress file, in file order (nothing if it is missing)."""
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    with handle:
        for line in handle:
            event = parse_progress_line(line)
            if event is not None:
                yield event


LINE_MAX_BYTES = 64 * 1024
"""A progress line is a few hundred bytes; a longer one is read in pieces, none parseable."""


def read_task_progress(paths: TaskPaths) -> Iterator[ProgressEvent]:
    """Every parseable event of a task's progress file, read as the service reads a run's
    files: no link followed (`store_reads`), no line held longer than LINE_MAX_BYTES."""
    try:
        handle = store_reads.open_file(paths.store_root, paths.progress)
    except FileNotFoundError:
        return
    with handle:
        while line := handle.readline(LINE_MAX_BYTES):
            event = parse_progress_line(line.decode("utf-8", errors="replace"))
            if event is not None:
                yield event


class ProgressWriter:
    """Appends events of one worker to the progress file.

    `unit_done` lines wait in memory until `flush` (the worker flushes once per wake of its
    loop, for the units whose results it read together), so a batch of lines is one `write`;
    any other event flushes them and goes out at once, in order.
    """

    def __init__(self, path: Path, worker: str) -> None:
        self.worker = worker
        self._worker_json = json.dumps(worker)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._pending: list[str] = []

    def _write(self, record: dict[str, object]) -> None:
        self._pending.append(json.dumps(record, separators=(",", ":")) + "\n")
        self.flush()

    def unit_done(self, unit: str, seconds: float, peak_memory_gb: float | None) -> None:
        """A unit done: its line waits for the next `flush`."""
        # formatted by hand: what json.dumps of a dict would write, cheaper (a unit's name is
        # letters and digits, `ledger.unit_names`: quoted as it is)
        peak = "null" if peak_memory_gb is None else repr(round(peak_memory_gb, 6))
        name = f'"{unit}"' if unit.isascii() and unit.isalnum() else json.dumps(unit)
        self._pending.append(
            f'{{"event":"{UNIT_DONE}","time":"{datetime.now(UTC).isoformat()}",'
            f'"worker":{self._worker_json},"unit":{name},'
            f'"seconds":{round(seconds, 6)!r},"peak_memory_gb":{peak}}}\n'
        )

    def flush(self) -> None:
        """Write the waiting lines, in one `write` (whole lines: never torn on a local disk)."""
        if not self._pending or self._fd < 0:
            return
        data = "".join(self._pending).encode()
        self._pending.clear()
        while data:  # a regular file takes it all at once; a short write is not lost
            data = data[os.write(self._fd, data) :]

    def claims_returned(self, units: list[str], holder: str) -> None:
        """The coordinator returned the claims of a stale holder (or a worker its own)."""
        self._write(
            {
                "event": CLAIMS_RETURNED,
                "time": datetime.now(UTC).isoformat(),
                "worker": self.worker,
                "units": units,
                "holder": holder,
            }
        )

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
            self._fd = -1

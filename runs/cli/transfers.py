"""Long transfers of the command line: a crate sent (`submit --from-crate`) or received
(`export`), with a bar of the bytes moved while a terminal shows it; and a crate directory
packed into the zip the API takes.

A pipe, a log or an agent gets no bar (nothing redrawn): the command's one line at the end says
what was done. No Django here.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from runs.cli.base import CommandError

Moved = Callable[[int], None]
"""Told the bytes moved so far."""


@contextmanager
def transfer_bar(what: str, total: int | None, console: Any = None) -> Iterator[Moved]:
    """A bar of `what` (bytes moved of `total`, unknown for a stream that is made as it is
    sent) on stderr while the block runs, when stderr is a terminal; else nothing."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TransferSpeedColumn,
    )

    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield lambda moved: None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(what, total=total)
        yield lambda moved: progress.update(task, completed=moved)
        progress.update(task, total=progress.tasks[0].completed)


class CountingReader:
    """A binary file read through while telling `moved` how many bytes went (an upload's
    body: urllib reads it in blocks)."""

    def __init__(self, stream: IO[bytes], moved: Moved) -> None:
        self.stream = stream
        self.moved = moved
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.count += len(data)
        self.moved(self.count)
        return data


def zip_crate(folder: Path, out: IO[bytes]) -> None:
    """The crate directory `folder` as a zip into `out`; CommandError naming the first link
    (a crate holds files only) and refusing a folder without the crate's metadata file."""
    from runs.crates.validation import METADATA_FILE

    if not (folder / METADATA_FILE).is_file():
        raise CommandError(f"{folder}: no {METADATA_FILE}: not an RO-Crate")
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for current, dirs, files in os.walk(folder):
            dirs.sort()
            here = Path(current)
            for name in sorted(dirs + files):
                path = here / name
                if path.is_symlink():
                    raise CommandError(f"{path}: a link; a crate holds files only")
            for name in sorted(files):
                path = here / name
                if path.is_file():
                    archive.write(path, path.relative_to(folder).as_posix())

"""The main job's closing summary: state, time, outputs, pages, and how to stop what it left."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runs.cli.follow_notes import run_seconds

OUTPUTS_SHOWN = 10
STOP_COMMAND = "simrun stop"


def summary_lines(
    run: dict[str, Any],
    outputs: list[str],
    *,
    pages: str,
    kept: str | None,
    login: str | None = None,
) -> list[str]:
    """The summary of an ended run: `outputs` as `simrun outputs` prints them (the first
    `OUTPUTS_SHOWN`); the time is the record's, from submission to the end (as following
    said); `kept` describes the services left running, which `simrun stop` stops."""
    seconds = run_seconds(run)
    lines = [
        f"state:    {run['state']}",
        f"time:     {seconds:.1f}s from submission to the end"
        if seconds is not None
        else "time:     unknown (the run has no end recorded)",
    ]
    if run.get("message"):
        lines.append(f"message:  {run['message']}")
    for number, path in enumerate(outputs[:OUTPUTS_SHOWN] or ["(none)"]):
        lines.append(f"{'outputs:' if number == 0 else '':10}{path}")
    if len(outputs) > OUTPUTS_SHOWN:
        lines.append(
            f"{'':10}... and {len(outputs) - OUTPUTS_SHOWN} more (`simrun outputs {run['id']}`)"
        )
    lines.append(f"pages:    {pages}")
    if login is not None:
        lines.append(f"login:    {login}")
    if kept is not None:
        lines.append(f"services: {kept}; stop them with `{STOP_COMMAND}`")
    return lines


def print_summary(lines: list[str], write: Callable[[str], None] = print) -> None:
    write("")
    for line in lines:
        write(line)

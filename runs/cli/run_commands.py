"""`simrun submit|runs|show|follow|logs|cancel|outputs`: the same verbs here or over the API."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from runs.cli.base import django_ready, setup_django
from runs.cli.follow_notes import run_seconds, task_times, watched
from runs.cli.progress import ENDED, follow_bars, follow_plain, polls
from runs.cli.workflow_commands import read_workflow
from runs.states import RunState


class Lab(Protocol):
    def submit(
        self,
        *,
        workflow_text: str,
        sources: list[Path],
        group: str,
        reuse: bool = True,
        resume_from: str | None = None,
    ) -> dict[str, Any]: ...
    def runs(self, *, limit: int = 20) -> list[dict[str, Any]]: ...
    def show(self, run_id: str) -> dict[str, Any]: ...
    def cancel(self, run_id: str) -> dict[str, Any]: ...
    def logs(self, run_id: str, task_id: str, *, tail: int | None = None) -> str: ...
    def outputs(self, run_id: str) -> list[str]: ...


def lab(*, over_service: bool = True) -> Lab:
    """The API when SIMRUN_URL is set; else this machine's running service over HTTP when
    there is one (and Django is not set up already); else this machine's simrun directly."""
    if os.environ.get("SIMRUN_URL"):
        from runs.cli.api_client import ApiLab

        return ApiLab.from_environment()
    if over_service and not django_ready():
        from runs.cli.local_service import running_service

        service = running_service()
        if service is not None:
            from runs.cli.service_lab import ServiceLab

            return ServiceLab(service)
    setup_django()
    from runs.cli.direct_lab import DirectLab

    return DirectLab()


def register(sub: Any) -> None:
    p = sub.add_parser("submit", help="submit a workflow")
    p.add_argument("workflow", type=Path)
    p.add_argument(
        "--source",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="a source directory to snapshot; the first is the model",
    )
    p.add_argument("--group", default="")
    p.add_argument("--follow", action="store_true", help="follow the run until it ends")
    p.add_argument(
        "--resume",
        metavar="RUN",
        default=None,
        help="reuse the units RUN has done first (then those of any earlier run)",
    )
    p.add_argument(
        "--no-reuse",
        dest="reuse",
        action="store_false",
        help="compute every unit, even those done in earlier runs with the same key",
    )
    p.set_defaults(handler=submit)
    p = sub.add_parser("runs", help="list recent runs")
    p.add_argument("--limit", type=int, default=20)
    p.set_defaults(handler=list_runs)
    for name, handler, text in (
        ("show", show, "show a run and its tasks"),
        ("follow", follow, "follow a run with live progress bars until it ends"),
        ("cancel", cancel, "cancel a run"),
        ("outputs", outputs, "list a run's output files"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("run")
        p.set_defaults(handler=handler)
    p = sub.add_parser("logs", help="print the logs of a task's pods")
    p.add_argument("run")
    p.add_argument("task")
    p.add_argument("--tail", type=int, default=None)
    p.add_argument("--follow", action="store_true", help="keep printing until the run ends")
    p.set_defaults(handler=logs)


def submit(args: argparse.Namespace) -> int:
    the_lab = lab()
    text = read_workflow(args.workflow)
    run = the_lab.submit(
        workflow_text=text,
        sources=args.source,
        group=args.group,
        reuse=args.reuse,
        resume_from=args.resume,
    )
    print(f"submitted run {run['id']} ({run['name']})")
    if args.follow:
        return follow_run(the_lab, run["id"])
    return 0


def list_runs(args: argparse.Namespace) -> int:
    print(f"{'RUN':16} {'NAME':24} {'STATE':11} {'PROGRESS':>8}  {'OWNER':12} CREATED")
    for run in lab().runs(limit=args.limit):
        live = run.get("progress") is not None and run["state"] not in ENDED
        progress = f"{run['progress'] * 100:.0f}%" if live else ""  # the API's: none once ended
        print(
            f"{run['id']:16} {run['name'][:24]:24} {run['state']:11} {progress:>8}  "
            f"{run['owner'][:12]:12} {run['created_at'][:19]}"
        )
    return 0


def show(args: argparse.Namespace) -> int:
    run = lab().show(args.run)
    print(f"run {run['id']}  {run['name']}  {run['state']}  owner {run['owner']}")
    if run["message"]:
        print(f"  {run['message']}")
    environment = run.get("environment") or {}
    if environment.get("ref"):
        print(f"  environment {environment['ref']}")
    for package in environment.get("local_packages", []):
        print(f"  local package {package['name']} {package['digest']}")
    reuse = run.get("reuse") or {}
    if reuse:
        sources = ", ".join(f"{n} from {r}" for r, n in sorted(reuse["sources"].items()))
        print(f"  {reuse['text']}" + (f" ({sources})" if sources else ""))
    for task in run["tasks"]:
        count = f"{task['done']}/{task['total']}"
        print(f"  {task['id']:24} {task['state']:10} {count:>11}  {task_times(task)}")
        if task.get("message"):
            print(f"    {task['message']}")
    return 0


def follow(args: argparse.Namespace) -> int:
    return follow_run(lab(), args.run)


def follow_run(
    the_lab: Lab,
    run_id: str,
    *,
    interval: float = 0.5,
    check: Callable[[], None] | None = None,
) -> int:
    """Progress per task until the run ends (live bars in a terminal, plain lines elsewhere);
    exit 0 only if it succeeded.

    `check` is called at every poll and may raise (the services that run it went away)."""
    from rich.console import Console

    console = Console(stderr=False)
    if console.is_terminal:
        runs = polls(the_lab, run_id, interval=interval, check=check, say=console.print)
        run = follow_bars(watched(runs, console.print), console)
    else:

        def say(line: str) -> None:
            print(line, flush=True)

        runs = polls(the_lab, run_id, interval=interval, check=check, say=say)
        run = follow_plain(watched(runs, say), say)
    seconds = run_seconds(run)
    took = "" if seconds is None else f" {seconds:.1f}s after submission"
    console.print(f"run {run['id']} {run['state']}{took}")
    if run["message"]:
        console.print(f"  {run['message']}")
    return 0 if run["state"] == RunState.SUCCEEDED else 1


def cancel(args: argparse.Namespace) -> int:
    run = lab().cancel(args.run)
    note = f"; {run['note']}" if run.get("note") else ""
    print(f"run {run['id']} {run['state']}{note}")
    return 0


def outputs(args: argparse.Namespace) -> int:
    for path in lab(over_service=False).outputs(args.run):
        print(path)
    return 0


def logs(args: argparse.Namespace) -> int:
    the_lab = lab(over_service=False)
    printed = 0
    while True:
        text = the_lab.logs(args.run, args.task, tail=args.tail)
        lines = text.splitlines()
        for line in lines[printed:]:
            print(line)
        printed = len(lines)
        sys.stdout.flush()
        if not args.follow or the_lab.show(args.run)["state"] in ENDED:
            return 0
        time.sleep(1.0)

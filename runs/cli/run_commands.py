"""`simrun submit|runs|show|follow|cancel|logs|outputs|compare|estimate`: the run verbs
(`submit --from-crate` runs a crate again).

Each is a request of the API through `runs/cli/client.py` (this machine's `simrun serve`, or
SIMRUN_URL) and prints its answer; none reads the database or the store itself.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runs.cli.base import CommandError
from runs.cli.follow_notes import run_seconds, task_times, watched
from runs.cli.progress import ENDED, follow_bars, follow_plain, polls
from runs.cli.workflow_commands import read_workflow
from runs.states import RunState, TaskState

CANCEL_WAIT_S = 120.0  # a cancel waits this long at most for the run's pods to stop

if TYPE_CHECKING:  # the client is imported when a verb runs: `validate` needs no HTTP
    from runs.cli.client import Client


def connect() -> Client:
    from runs.cli.client import connect as connected

    return connected()


def register(sub: Any) -> None:
    _register_submit(sub)
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
    p.add_argument("--follow", action="store_true", help="keep printing until the task ends")
    p.set_defaults(handler=logs)
    p = sub.add_parser("compare", help="two or more runs side by side")
    p.add_argument("runs", nargs="+", metavar="RUN")
    p.add_argument("--all", action="store_true", help="every row, not only those that differ")
    p.set_defaults(handler=compare)
    p = sub.add_parser("estimate", help="resources, plan and expected time of each task")
    p.add_argument("workflow", type=Path)
    _sources(p)
    p.set_defaults(handler=estimate)


def _register_submit(sub: Any) -> None:
    p = sub.add_parser("submit", help="submit a workflow, or run a crate again")
    p.add_argument("workflow", type=Path, nargs="?", help="the workflow (YAML or JSON)")
    p.add_argument(
        "--from-crate",
        type=Path,
        metavar="CRATE",
        default=None,
        help="run the Workflow Run RO-Crate CRATE (a zip or a directory) again, instead of a "
        "workflow: its workflow, sources and settings, checked against their digests",
    )
    _sources(p)
    p.add_argument("--group", default="")
    p.add_argument("--follow", action="store_true", help="follow the run until it ends")
    p.add_argument(
        "--resume",
        metavar="RUN",
        default=None,
        help="reuse the units RUN has done first (then those of any earlier run)",
    )
    reuse = p.add_mutually_exclusive_group()
    reuse.add_argument(
        "--no-reuse",
        dest="reuse",
        action="store_false",
        help="compute every unit, even those done in earlier runs with the same key",
    )
    reuse.add_argument(
        "--reuse",
        dest="reuse",
        action="store_true",
        help="with --from-crate: reuse units done here before (a crate's run computes all)",
    )
    p.add_argument(
        "--explain-reuse",
        action="store_true",
        help="submit nothing: say per task what would be reused and, when not all, which part"
        " of its key differs from the earlier run",
    )
    p.set_defaults(handler=submit, reuse=None)


def _sources(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--source",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="a source directory to snapshot; the first is the model",
    )


def submit(args: argparse.Namespace) -> int:
    if args.from_crate is not None:
        if args.workflow is not None or args.source:
            raise CommandError(
                "--from-crate: the crate holds the workflow and its sources; give no workflow "
                "and no --source with it"
            )
        return submit_crate(args)
    if args.workflow is None:
        raise CommandError("give the workflow to submit (or --from-crate CRATE)")
    text = read_workflow(args.workflow)
    client = connect()
    reuse = True if args.reuse is None else args.reuse
    if args.explain_reuse:
        return explain_reuse(client, text, args, reuse=reuse)
    run = client.submit(text, args.source, group=args.group, reuse=reuse, resume_from=args.resume)
    print(f"submitted run {run['id']} ({run['name']})", flush=True)
    return follow_run(client, run["id"]) if args.follow else 0


def explain_reuse(client: Client, text: str, args: argparse.Namespace, *, reuse: bool) -> int:
    """Per task: the units a submission now would reuse and why not more; nothing submitted."""
    answer = client.explain_reuse(text, args.source, reuse=reuse, resume_from=args.resume)
    print(f"{answer['text']} (nothing submitted)")
    for task in answer["tasks"]:
        print(f"  {task['task_id']:24} {task['note'].get('text', '')}")
    return 0


def submit_crate(args: argparse.Namespace) -> int:
    """`simrun submit --from-crate CRATE`: the crate's zip (a directory is packed first, a
    link in it refused) sent to the API, which checks it and runs it again."""
    from runs.cli.client import connect
    from runs.cli.transfers import CountingReader, transfer_bar, zip_crate

    crate: Path = args.from_crate
    if not crate.exists():
        raise CommandError(f"--from-crate {crate}: no such file or directory")
    client = connect()
    with tempfile.TemporaryFile() as packed:
        if crate.is_dir():
            zip_crate(crate, packed)
            size = packed.tell()
            packed.seek(0)
            source: Any = packed
        else:
            size = crate.stat().st_size
            source = crate.open("rb")
        with source, transfer_bar(f"sending {crate.name}", size) as moved:
            run = client.submit_crate(
                CountingReader(source, moved),
                size,
                group=args.group,
                reuse=bool(args.reuse),
                resume_from=args.resume,
            )
    print(
        f"submitted run {run['id']} ({run['name']}), a re-run of crate {run['from_crate']}",
        flush=True,
    )
    return follow_run(client, run["id"]) if args.follow else 0


def list_runs(args: argparse.Namespace) -> int:
    runs = connect().runs(limit=args.limit)
    print(f"{'RUN':16} {'NAME':24} {'STATE':11} {'PROGRESS':>8}  {'OWNER':12} CREATED")
    for run in runs:
        live = run["progress"] is not None and run["state"] not in ENDED
        progress = f"{run['progress'] * 100:.0f}%" if live else ""
        print(
            f"{run['id']:16} {run['name'][:24]:24} {run['state']:11} {progress:>8}  "
            f"{run['owner'][:12]:12} {run['created_at'][:19]}"
        )
    return 0


def show(args: argparse.Namespace) -> int:
    run = connect().show(args.run)
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
    print(f"  {lineage(run)}")
    for task in run["tasks"]:
        count = f"{task['done']}/{task['total']}"
        print(f"  {task['id']:24} {task['state']:10} {count:>11}  {task_times(task)}")
        if task.get("message"):
            print(f"    {task['message']}")
        note = task.get("reuse") or {}
        if note.get("text"):
            print(f"    {note['text']}")
        if note.get("copies"):
            print(f"    {note['copies']}")
    return 0


def lineage(run: dict[str, Any]) -> str:
    """Where the run came from and where it went: a crate's re-run or submitted here, and how
    many times it was exported as a crate."""
    exports = int(run.get("exports") or 0)
    origin = f"re-run of crate {run['from_crate']}" if run.get("from_crate") else "submitted here"
    return f"{origin}; exported {exports} time{'' if exports == 1 else 's'}"


def follow(args: argparse.Namespace) -> int:
    return follow_run(connect(), args.run)


def follow_run(
    client: Client,
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
        runs = polls(client, run_id, interval=interval, check=check, say=console.print)
        run = follow_bars(watched(runs, console.print), console)
    else:

        def say(line: str) -> None:
            print(line, flush=True)

        runs = polls(client, run_id, interval=interval, check=check, say=say)
        run = follow_plain(watched(runs, say), say)
    seconds = run_seconds(run)
    took = "" if seconds is None else f" {seconds:.1f}s after submission"
    console.print(f"run {run['id']} {run['state']}{took}")
    if run["message"]:
        console.print(f"  {run['message']}")
    return 0 if run["state"] == RunState.SUCCEEDED else 1


def cancel(args: argparse.Namespace) -> int:
    client = connect()
    run = client.cancel(args.run)
    if run.get("pending") == "cancelling":
        # said only once the run's pods have stopped: a cancel printed while they computed
        # on would not be one
        print(f"cancelling run {run['id']}: stopping its pods", flush=True)
        deadline = time.monotonic() + CANCEL_WAIT_S
        while run.get("pending") == "cancelling" and time.monotonic() < deadline:
            time.sleep(0.5)
            run = client.show(args.run)
        if run.get("pending") == "cancelling":
            print(
                f"run {run['id']} {run['state']}; its pods are still stopping (simrun's "
                f"services end them within their grace)"
            )
            return 0
        print(f"run {run['id']} {run['state']}; its pods have stopped")
        return 0
    print(f"run {run['id']} {run['state']}")
    return 0


def output_paths(client: Client, run_id: str) -> list[str]:
    """The run's output files as paths to open here (under the store, when it is mounted
    here), else as the API names them (relative to the store)."""
    paths = [f["path"] for f in client.outputs(run_id)]
    return paths if client.store is None else [str(client.store / p) for p in paths]


def outputs(args: argparse.Namespace) -> int:
    for path in output_paths(connect(), args.run):
        print(path)
    return 0


def logs(args: argparse.Namespace) -> int:
    """Every attempt's log under a `==> pod-attempt <==` header; with --follow its lines as
    `[pod#attempt] line`, then new ones as they come until the task ends."""
    client = connect()
    entries = client.logs(args.run, args.task, tail=None if args.follow else args.tail)
    if not args.follow:
        for entry in entries:
            print(f"==> {entry['pod']}-{entry['attempt']} <==")
            text = entry["text"] if entry["error"] is None else f"[{entry['error']}]\n"
            print(text, end="" if text.endswith("\n") else "\n")
            if entry.get("cut"):
                print(cut_note(entry), file=sys.stderr)
        return 0
    printed: dict[str, int] = {}  # complete lines of each attempt printed so far
    for entry in entries:
        key, text = f"[{entry['pod']}#{entry['attempt']}]", entry["text"]
        lines = text[: text.rfind("\n") + 1].splitlines()
        for line in lines[-args.tail :] if args.tail else lines:
            print(f"{key} {line}")
        printed[key] = len(lines)
    while True:  # a stream ends with the task, or after its maximum time: then again
        seen: dict[str, int] = {}
        for line in client.follow_logs(args.run, args.task):
            key = line.partition(" ")[0]
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > printed.get(key, 0):
                print(line, flush=True)
                printed[key] = seen[key]
        run = client.show(args.run)
        task = next(t for t in run["tasks"] if t["id"] == args.task)
        if run["state"] in ENDED or task["state"] in TaskState.final():
            return 0


CUT_WHY = {
    "log": "one log shows at most its last 4 MiB",
    "answer": "an answer holds at most SIMRUN_LOG_ANSWER_MAX_BYTES of a task's logs, "
    "each log its share from its end",
}


def cut_note(entry: dict[str, Any]) -> str:
    """What `logs` says of a log printed without its start: how much is left out and why."""
    why = CUT_WHY.get(str(entry["cut"]), str(entry["cut"]))
    return (
        f"simrun: {entry['pod']}-{entry['attempt']}: its first {entry['start']:,} bytes are not "
        f"shown ({why}); --tail N prints a log's last N lines"
    )


def compare(args: argparse.Namespace) -> int:
    """The comparison's rows by section (only those that differ, unless --all)."""
    comparison = connect().compare(args.runs)
    ids = [r["id"] for r in comparison["runs"]]
    rows = [r for r in comparison["rows"] if args.all or r["differs"]]
    width = max([len("FIELD"), *(len(r["key"]) for r in rows)])
    print(f"{'FIELD':{width}}  " + "  ".join(f"{i:18}" for i in ids))
    section = None
    for row in rows:
        if row["section"] != section:
            section = row["section"]
            print(f"[{section}]")
        values = ["-" if v is None else str(v) for v in row["values"]]
        if section == "outputs" and row["key"] != NOT_COMPARED:
            values = [v[:12] for v in values]  # a SHA-256: its first 12 digits tell them apart
        print(f"{row['key']:{width}}  " + "  ".join(f"{v:18}" for v in values).rstrip())
    if not rows:
        print("no differences")
    print(outputs_verdict([r for r in comparison["rows"] if r["section"] == "outputs"]))
    return 0


NOT_COMPARED = "(not compared)"
"""The key of the outputs row of a run whose files the service did not hash (too many)."""


def outputs_verdict(rows: list[dict[str, Any]]) -> str:
    """Whether the runs made the same bytes, from the outputs section's rows (one per file)."""
    skipped = [r for r in rows if r["key"] == NOT_COMPARED]
    if skipped:
        why = "; ".join(str(v) for v in skipped[0]["values"] if v)
        return f"outputs: not compared ({why})"
    if not rows:
        return "outputs: none"
    differ = sum(1 for r in rows if r["differs"])
    if differ:
        return f"outputs: {differ} of {len(rows)} files differ"
    return f"outputs: identical ({len(rows)} files, byte for byte)"


def estimate(args: argparse.Namespace) -> int:
    """Per task: units, pods and each pod's shape, and the expected time (from history)."""
    text = read_workflow(args.workflow)
    tasks = connect().estimate(text, args.source)
    print(f"{'TASK':24} {'TYPE':16} {'UNITS':>7} {'PODS':>4} {'CORES':>6} {'MEMORY':>9}  TIME")
    for task in tasks:
        shape = task["plan"]["shape"]
        units = "" if task["units"] is None else str(task["units"])
        time = "no history" if task["seconds"] is None else f"{task['seconds']:.0f}s"
        print(
            f"{task['task_id']:24} {task['type'][:16]:16} {units:>7} {task['plan']['pods']:>4} "
            f"{shape['cores']:>6g} {shape['memory_gb']:>7.2f}GB  {time}"
        )
    return 0

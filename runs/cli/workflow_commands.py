"""`simrun validate`: check a workflow file and show its order."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from runs.cli.base import CommandError


def register(sub: Any) -> None:
    p = sub.add_parser("validate", help="check a workflow file; print its task order or errors")
    p.add_argument("workflow", type=Path, help="a workflow in YAML or JSON")
    p.set_defaults(handler=validate)


def read_workflow(path: Path) -> str:
    """A workflow file's text within the limits of `runs.workflow_text`; CommandError else."""
    from runs.workflow import WorkflowInvalid
    from runs.workflow_text import read_file

    try:
        return read_file(path)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
    except WorkflowInvalid as exc:
        raise CommandError("\n".join(_located(path, exc.errors))) from None


def validate(args: argparse.Namespace) -> int:
    """Needs no installation: the workflow and the installed plugins only."""
    # no Django: validation is plain code, and it imports only the types the workflow names
    from runs.validation import load
    from runs.workflow import WorkflowInvalid

    text = read_workflow(args.workflow)
    try:
        workflow = load(text)
    except WorkflowInvalid as exc:
        for line in _located(args.workflow, exc.errors):
            print(line)
        return 1
    print(f"ok: {workflow.name} ({len(workflow.tasks)} tasks)")
    print("order: " + " -> ".join(t.id for t in workflow.order()))
    return 0


def _located(path: Path, errors: list[Any]) -> list[str]:
    return [f"{path}:{e.line}: {e}" if e.line else f"{path}: {e}" for e in errors]

"""`simrun validate`: check a workflow file and show its order."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from runs.cli.main import CommandError


def register(sub: Any) -> None:
    p = sub.add_parser("validate", help="check a workflow file; print its task order or errors")
    p.add_argument("workflow", type=Path, help="a workflow in YAML or JSON")
    p.set_defaults(handler=validate)


def validate(args: argparse.Namespace) -> int:
    """Needs no installation: the workflow and the installed plugins only."""
    # no Django: validation is plain code, and it imports only the types the workflow names
    from runs.validation import errors_of, load

    try:
        text = args.workflow.read_text()
    except OSError as exc:
        raise CommandError(f"cannot read {args.workflow}: {exc.strerror}") from None
    errors = errors_of(text)
    if errors:
        for error in errors:
            where = f"{args.workflow}:{error.line}: " if error.line else f"{args.workflow}: "
            print(f"{where}{error}")
        return 1
    workflow = load(text)
    print(f"ok: {workflow.name} ({len(workflow.tasks)} tasks)")
    print("order: " + " -> ".join(t.id for t in workflow.order()))
    return 0

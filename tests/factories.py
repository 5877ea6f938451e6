"""Typed factories of the records tests need; named people of the lab."""

from __future__ import annotations

from typing import Any

from runs.models import Identity, IdentityKind, Run, Task
from runs.services.identities import NewToken, create_identity, create_token

OWNER = "olivia"
PERSON = "paul"
OTHER_PERSON = "sam"
AGENT = "ada"  # acts for paul


def identity(name: str, kind: str = IdentityKind.PERSON, acts_for: str | None = None) -> Identity:
    existing = Identity.objects.filter(name=name).first()
    if existing is not None:
        return existing
    return create_identity(name=name, kind=kind, acts_for=acts_for, password=f"{name}-pw-123")


def owner() -> Identity:
    return identity(OWNER, IdentityKind.OWNER)


def person() -> Identity:
    return identity(PERSON)


def other_person() -> Identity:
    return identity(OTHER_PERSON)


def agent() -> Identity:
    person()
    return identity(AGENT, IdentityKind.AGENT, acts_for=PERSON)


def token(of: Identity) -> NewToken:
    return create_token(identity=of, label="test")


def run(*, by: Identity | None = None, state: str = "running", **fields: Any) -> Run:
    """A run record of a one-task `command` workflow (no backend involved)."""
    by = by or person()
    workflow = {
        "name": "echo",
        "tasks": [{"id": "hello", "type": "command", "settings": {"args": ["echo", "hi"]}}],
    }
    values: dict[str, Any] = {
        "name": "echo",
        "owner": by,
        "principal": by.principal,
        "tier": by.kind,
        "workflow": workflow,
        "state": state,
    }
    values.update(fields)
    record = Run(**values)
    record.workflow_name = f"simrun-{record.id}"
    record.save()
    Task.objects.create(run=record, task_id="hello", position=0, type="command")
    return record

"""People, agents and the owner, and their bearer tokens (only hashes are stored)."""

from __future__ import annotations

import getpass
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from runs.models import Identity, IdentityKind, Token
from runs.token_checks import token_checks

TOKEN_PREFIX = "srn_"
PREFIX_SHOWN = 8


class IdentityError(ValueError):
    """A request about identities or tokens that cannot be honoured; says which and why."""


def hash_token(token: str) -> str:
    """The SHA-256 (hex) a token is stored and looked up by."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class NewToken:
    """A token just created: the only time its secret is seen."""

    token: Token
    secret: str


def create_identity(
    *, name: str, kind: str, acts_for: str | None = None, password: str | None = None
) -> Identity:
    """Create the owner, a person (with a Django user to log in as) or an agent."""
    if kind not in IdentityKind.values:
        raise IdentityError(f"kind {kind!r} is not one of {', '.join(IdentityKind.values)}")
    if not name or len(name) > 64:
        raise IdentityError("name must be 1 to 64 characters")
    if Identity.objects.filter(name=name).exists():
        raise IdentityError(f"an identity named {name!r} exists already")
    if kind == IdentityKind.OWNER and Identity.objects.filter(kind=IdentityKind.OWNER).exists():
        raise IdentityError("the lab has an owner already")
    if kind == IdentityKind.AGENT:
        if acts_for is None:
            raise IdentityError("an agent needs acts_for: the person it acts for")
        person = Identity.objects.filter(name=acts_for).exclude(kind=IdentityKind.AGENT).first()
        if person is None:
            raise IdentityError(f"acts_for {acts_for!r} is not a person or the owner")
        return Identity.objects.create(name=name, kind=kind, acts_for=person)
    if acts_for is not None:
        raise IdentityError("only an agent acts for someone")
    with transaction.atomic():
        user_model = get_user_model()
        user = user_model.objects.filter(username=name).first()
        if user is None:
            user = user_model.objects.create_user(username=name, password=password)
        elif password:
            user.set_password(password)
        if kind == IdentityKind.OWNER:
            user.is_staff = True
            user.is_superuser = True
        user.save()
        return Identity.objects.create(name=name, kind=kind, user=user)


def owner_identity() -> Identity:
    """The lab's owner, made (named for this machine's user) when there is none yet: whom a
    fresh installation's `simrun serve` gives the commands of this machine a token of."""
    owner = Identity.objects.filter(kind=IdentityKind.OWNER).first()
    return owner or create_identity(name=getpass.getuser(), kind=IdentityKind.OWNER)


def create_token(*, identity: Identity, label: str = "") -> NewToken:
    """A new bearer token for an identity; its secret is returned once and never stored."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = Token.objects.create(
        identity=identity, label=label, prefix=secret[:PREFIX_SHOWN], hash=hash_token(secret)
    )
    return NewToken(token=token, secret=secret)


MACHINE_LABEL = "simrun commands on this machine"


def machine_token(*, identity: Identity, secret: str | None) -> str:
    """The secret of the token this machine's `simrun` commands use to reach its service:
    `secret` while it is an active token of `identity`, else a new one (earlier ones of this
    label revoked, so at most one is active)."""
    if secret:
        found = Token.objects.filter(
            hash=hash_token(secret), identity=identity, revoked_at__isnull=True
        )
        if found.exists():
            return secret
    with transaction.atomic():
        stale = Token.objects.filter(
            identity=identity, label=MACHINE_LABEL, revoked_at__isnull=True
        )
        hashes = list(stale.values_list("hash", flat=True))
        stale.update(revoked_at=timezone.now())
        transaction.on_commit(lambda: _forget_all(hashes))
        return create_token(identity=identity, label=MACHINE_LABEL).secret


def _forget_all(hashes: list[str]) -> None:
    for digest in hashes:
        token_checks.forget(digest)


def revoke_token(*, prefix_or_id: str) -> Token:
    """Revoke one token, named by its id or its shown prefix (which must be unambiguous)."""
    tokens = Token.objects.filter(revoked_at__isnull=True)
    matches = list(
        tokens.filter(pk=int(prefix_or_id))
        if prefix_or_id.isdigit()
        else tokens.filter(prefix__startswith=prefix_or_id)
    )
    if not matches:
        raise IdentityError(f"no active token matches {prefix_or_id!r}")
    if len(matches) > 1:
        raise IdentityError(f"{len(matches)} tokens match {prefix_or_id!r}; give more characters")
    updated = Token.objects.filter(pk=matches[0].pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    if updated == 0:
        raise IdentityError(f"token {prefix_or_id!r} was revoked meanwhile")
    # Forget now and again at commit: a request of this process may check the token between.
    token_checks.forget(matches[0].hash)
    transaction.on_commit(lambda: token_checks.forget(matches[0].hash))
    matches[0].refresh_from_db()
    return matches[0]


def import_tokens(*, data: Any) -> dict[str, int]:
    """Create the identities and tokens a tokens file lists; what exists is kept.

    The file: `owner: NAME`, `people: [{name, tokens: [...]}]`,
    `agents: [{name, acts_for, tokens: [...]}]`. A token is its secret or `sha256:<hex>`.
    Returns how many identities and tokens were created.
    """
    if not isinstance(data, dict):
        raise IdentityError("a tokens file is a mapping with owner, people and agents")
    unknown = sorted(set(data) - {"owner", "people", "agents"})
    if unknown:
        raise IdentityError(f"unknown key(s) {', '.join(unknown)} (allowed: owner, people, agents)")
    created = {"identities": 0, "tokens": 0}
    with transaction.atomic():
        owner = data.get("owner")
        people = _entries(data, "people")
        if owner is not None and not any(p["name"] == owner for p in people):
            people.insert(0, {"name": owner, "tokens": []})
        for entry in people:
            kind = IdentityKind.OWNER if entry["name"] == owner else IdentityKind.PERSON
            created["tokens"] += _import_one(entry, kind, None, created)
        for entry in _entries(data, "agents"):
            if not entry.get("acts_for"):
                raise IdentityError(f"agents: {entry['name']!r} needs acts_for")
            created["tokens"] += _import_one(
                entry, IdentityKind.AGENT, str(entry["acts_for"]), created
            )
    return created


def _entries(data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    entries = data.get(key) or []
    if not isinstance(entries, list):
        raise IdentityError(f"{key}: a list of entries with a name")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise IdentityError(f"{key}[{i}]: an entry needs a name")
        extra = sorted(set(entry) - {"name", "tokens", "acts_for"})
        if extra:
            raise IdentityError(f"{key}[{i}]: unknown key(s) {', '.join(extra)}")
        out.append(entry)
    return out


def _import_one(entry: dict[str, Any], kind: str, acts_for: str | None, created: dict) -> int:
    identity = Identity.objects.filter(name=entry["name"]).first()
    if identity is None:
        identity = create_identity(name=entry["name"], kind=kind, acts_for=acts_for)
        created["identities"] += 1
    elif identity.kind != kind:
        raise IdentityError(f"{entry['name']!r} exists as {identity.kind}, the file says {kind}")
    added = 0
    for token in entry.get("tokens") or []:
        if not isinstance(token, str) or not token:
            raise IdentityError(f"{entry['name']!r}: a token is a non-empty string")
        digest = token.removeprefix("sha256:") if token.startswith("sha256:") else hash_token(token)
        if len(digest) != 64:
            raise IdentityError(f"{entry['name']!r}: sha256: needs 64 hex digits")
        prefix = "sha256" if token.startswith("sha256:") else token[:PREFIX_SHOWN]
        _, new = Token.objects.get_or_create(
            hash=digest, defaults={"identity": identity, "prefix": prefix, "label": "imported"}
        )
        added += int(new)
    return added


def identity_for_token(secret: str) -> Identity | None:
    """The identity of an active token, marking it used; None for unknown or revoked ones."""
    token = (
        Token.objects.select_related("identity", "identity__acts_for")
        .filter(hash=hash_token(secret), revoked_at__isnull=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        Token.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.identity

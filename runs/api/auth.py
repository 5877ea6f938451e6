"""Bearer tokens (S1, S2): `Authorization: Bearer <token>` names the identity of a request.

Only the SHA-256 of a token is stored; an unknown or revoked token is refused with 401. The
identity decides the priority of the runs it submits (`runs.priorities.tier_of`).

A request checks in the database that its token is active (one indexed lookup of one column)
unless this process found it active less than `SIMRUN_TOKEN_RECHECK_S` ago
(`runs.token_checks`): a revocation made in this process holds from the next request on, one
made elsewhere within that time. The identity behind an active token is kept in the process
for IDENTITY_TTL_S: a change of an identity's kind or person shows within that time. Loading
it goes through `identity_for_token`, which also notes when the token was last used.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from functools import cache

from django.conf import settings
from django.db import connection, models
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated
from rest_framework.request import Request

from runs.models import Identity, Token
from runs.services.identities import hash_token, identity_for_token
from runs.token_checks import token_checks

SCHEME = "bearer"
IDENTITY_TTL_S = 30.0


@dataclass(frozen=True)
class Caller:
    """Who sent a request: the identity of its token, and the token's hash (rate limits)."""

    identity: Identity
    token_hash: str
    is_authenticated: bool = True
    is_anonymous: bool = False

    def __str__(self) -> str:
        return self.identity.name


@cache
def _active_token_sql() -> str:
    quote = connection.ops.quote_name

    def column(name: str) -> str:
        field = Token._meta.get_field(name)
        assert isinstance(field, models.Field)
        return quote(str(field.column))

    return (
        f"SELECT {column('identity')} FROM {quote(Token._meta.db_table)} "
        f"WHERE {column('hash')} = %s AND {column('revoked_at')} IS NULL"
    )


def active_identity_id(token_hash: str) -> int | None:
    """The identity of an active token with this hash; None for unknown or revoked ones."""
    with connection.cursor() as cursor:
        cursor.execute(_active_token_sql(), [token_hash])
        row = cursor.fetchone()
    return None if row is None else int(row[0])


class _Identities:
    """Identities of active tokens, kept for a while in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._found: dict[str, tuple[float, Identity]] = {}

    def get(self, token_hash: str, identity_id: int) -> Identity | None:
        with self._lock:
            entry = self._found.get(token_hash)
        if entry is None or entry[1].pk != identity_id:
            return None
        if time.monotonic() - entry[0] > IDENTITY_TTL_S:
            return None
        return entry[1]

    def put(self, token_hash: str, identity: Identity) -> None:
        with self._lock:
            if len(self._found) > 10_000:
                self._found.clear()
            self._found[token_hash] = (time.monotonic(), identity)


_identities = _Identities()


def identity_of_token(secret: str, token_hash: str) -> Identity | None:
    """The identity of an active token (and its hash), None for an unknown or revoked one."""
    identity_id = token_checks.fresh(token_hash, max_age_s=settings.SIMRUN_TOKEN_RECHECK_S)
    if identity_id is None:
        identity_id = active_identity_id(token_hash)
        if identity_id is None:
            return None
        token_checks.note(token_hash, identity_id)
    identity = _identities.get(token_hash, identity_id)
    if identity is None:
        identity = identity_for_token(secret)
        if identity is not None:
            _identities.put(token_hash, identity)
    return identity


class BearerTokenAuthentication(BaseAuthentication):
    """DRF authentication by bearer token; without a header the request is anonymous (401)."""

    def authenticate(self, request: Request) -> tuple[Caller, str] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, secret = header.partition(" ")
        secret = secret.strip()
        if scheme.lower() != SCHEME or not secret or " " in secret:
            raise AuthenticationFailed("send the header as 'Authorization: Bearer <token>'")
        token_hash = hash_token(secret)
        identity = identity_of_token(secret, token_hash)
        if identity is None:
            raise AuthenticationFailed("the token is unknown or revoked")
        return Caller(identity, token_hash), token_hash

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="simrun"'


def identity_of(request: Request) -> Identity:
    """The identity of an authenticated request (views behind IsAuthenticated only)."""
    caller = request.user
    if not isinstance(caller, Caller):
        raise NotAuthenticated()
    return caller.identity

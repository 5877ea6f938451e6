"""Bearer tokens (S1, S2): `Authorization: Bearer <token>` names the identity of a request.

Only the SHA-256 of a token is stored; an unknown or revoked token is refused with 401. The
identity decides the priority of the runs it submits (`runs.priorities.tier_of`).

A request looks its token up in the database (`identity_for_token`, which also notes when the
token was last used) unless this process found it active less than `SIMRUN_TOKEN_RECHECK_S`
ago (`runs.token_checks`): a revocation made in this process holds from the next request on,
one made elsewhere, and a change of the identity's kind or person, within that time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated
from rest_framework.request import Request

from runs.services.identities import hash_token, identity_for_token
from runs.token_checks import token_checks

if TYPE_CHECKING:
    from runs.models import Identity

SCHEME = "bearer"


@dataclass(frozen=True)
class Caller:
    """Who sent a request: the identity of its token, and the token's hash (rate limits)."""

    identity: Identity
    token_hash: str
    is_authenticated: bool = True
    is_anonymous: bool = False

    def __str__(self) -> str:
        return self.identity.name


def identity_of_token(secret: str, token_hash: str) -> Identity | None:
    """The identity of an active token (and its hash), None for an unknown or revoked one."""
    identity = token_checks.fresh(token_hash, max_age_s=settings.SIMRUN_TOKEN_RECHECK_S)
    if identity is None:
        identity = identity_for_token(secret)
        if identity is not None:
            token_checks.note(token_hash, identity)
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

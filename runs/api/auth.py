"""Bearer tokens (S1, S2): `Authorization: Bearer <token>` names the identity of a request.

Only the SHA-256 of a token is stored; an unknown or revoked token is refused with 401. The
identity decides the priority of the runs it submits (`runs.priorities.tier_of`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated
from rest_framework.request import Request

from runs.models import Identity
from runs.services.identities import hash_token, identity_for_token

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
        identity = identity_for_token(secret)
        if identity is None:
            raise AuthenticationFailed("the token is unknown or revoked")
        token_hash = hash_token(secret)
        return Caller(identity, token_hash), token_hash

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="simrun"'


def identity_of(request: Request) -> Identity:
    """The identity of an authenticated request (views behind IsAuthenticated only)."""
    caller = request.user
    if not isinstance(caller, Caller):
        raise NotAuthenticated()
    return caller.identity

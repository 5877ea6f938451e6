"""Whether a credential a request presents is still good, read without writing anything.

The web process's edge asks before it reads a body beyond the anonymous limit (a made-up
token must not buy a bigger body), and an open stream asks again every
SIMRUN_TOKEN_RECHECK_S (a revoked token, a deleted identity or a closed session ends it).
"""

from __future__ import annotations

from django.contrib.auth import SESSION_KEY
from django.contrib.sessions.backends.base import SessionBase
from django.utils.module_loading import import_string

from runs.models import Identity, Token


def token_identity(*, token_hash: str) -> Identity | None:
    """The identity of the active token of this hash; None once it is revoked or deleted."""
    token = (
        Token.objects.select_related("identity", "identity__acts_for")
        .filter(hash=token_hash, revoked_at__isnull=True)
        .first()
    )
    return None if token is None else token.identity


def session_identity(*, session_key: str) -> Identity | None:
    """The identity of the user logged in by this session; None once the session is gone,
    expired, or its user has no identity (or is no longer active)."""
    from django.conf import settings

    store: type[SessionBase] = import_string(f"{settings.SESSION_ENGINE}.SessionStore")
    data = store(session_key).load()  # {} for an unknown or expired session
    user_id = data.get(SESSION_KEY)
    if user_id is None:
        return None
    return (
        Identity.objects.select_related("acts_for")
        .filter(user_id=user_id, user__is_active=True)
        .first()
    )

"""One-time login links: how the owner opens the pages of a fresh installation at once.

The owner of an embedded installation has no password (it was made for this machine's user
by `simrun serve`). `simrun serve`, `simrun demo --keep` and `simrun login` print a link that
logs its holder in as the owner: valid once and for `SIMRUN_LOGIN_LINK_S` seconds. Its token
is Django's password-reset token (an HMAC of the user's id, password hash, last login and
the time, under the secret key) with a salt of its own: logging in moves the last login, so
a link that was used is no longer valid, and nothing is stored.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.utils.encoding import force_bytes
from django.utils.http import base36_to_int, urlsafe_base64_decode, urlsafe_base64_encode

from runs.models import Identity


class LoginLinkTokens(PasswordResetTokenGenerator):
    """Password-reset tokens of their own salt, valid for SIMRUN_LOGIN_LINK_S seconds."""

    key_salt = "simrun.services.login_links"

    def check_token(self, user: User | None, token: str | None) -> bool:
        if user is None or not token or token.count("-") != 1:
            return False
        try:
            made = base36_to_int(token.split("-")[0])
        except ValueError:
            return False
        age = self._num_seconds(self._now()) - made
        return 0 <= age <= settings.SIMRUN_LOGIN_LINK_S and super().check_token(user, token)


TOKENS = LoginLinkTokens()


class NoLoginLink(ValueError):
    """An identity that cannot log in to the pages (an agent)."""


def login_link_for(name: str | None = None) -> tuple[str, str]:
    """(who, path) of a new one-time link: of the person `name`, else of the owner (made for
    this machine's user when there is none yet); NoLoginLink when there is no such person."""
    from runs.services.identities import owner_identity

    identity = Identity.objects.filter(name=name).first() if name else owner_identity()
    if identity is None:
        raise NoLoginLink(f"no identity named {name!r} (`simrun person create {name}`)")
    return identity.name, login_link_path(identity)


def login_link_path(identity: Identity) -> str:
    """The path of a new one-time link that logs in as `identity` (the owner, a person)."""
    if identity.user is None:
        raise NoLoginLink(f"{identity.name} ({identity.kind}) has no login to the pages")
    uid = urlsafe_base64_encode(force_bytes(identity.user.pk))
    return f"/login/link/{uid}/{TOKENS.make_token(identity.user)}/"


def user_of_link(uid: str, token: str) -> User | None:
    """The user a link logs in; None when it was used, expired, or was never made here."""
    try:
        pk = urlsafe_base64_decode(uid).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    if not pk.isdigit():
        return None
    user = get_user_model().objects.filter(pk=pk, is_active=True).first()
    return user if TOKENS.check_token(user, token) else None

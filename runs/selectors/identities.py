"""Who the lab's people, agents and tokens are, as the pages and the admin commands read them."""

from __future__ import annotations

from django.db.models import QuerySet

from runs.models import Identity, Token


def identity_of_user(user_id: int) -> Identity | None:
    """The identity of a logged-in Django user (with whom it acts for); None without one."""
    return Identity.objects.select_related("acts_for").filter(user_id=user_id).first()


def identity_named(name: str) -> Identity | None:
    return Identity.objects.filter(name=name).first()


def identity_names() -> list[str]:
    """Every identity's name, sorted (the owners a run list may be filtered by)."""
    return list(Identity.objects.order_by("name").values_list("name", flat=True))


def tokens() -> QuerySet[Token]:
    """Every token with its identity, by identity and age (prefixes only: no secret is kept)."""
    return Token.objects.select_related("identity").order_by("identity__name", "created_at")

"""The token `simrun serve` keeps for this machine's commands: kept while it works, replaced
(and the old one revoked) when it does not, never more than one active."""

from __future__ import annotations

import pytest

from runs.models import Token
from runs.services.identities import (
    MACHINE_LABEL,
    identity_for_token,
    machine_token,
    revoke_token,
)
from tests import factories

pytestmark = pytest.mark.django_db


def active() -> list[Token]:
    return list(Token.objects.filter(label=MACHINE_LABEL, revoked_at__isnull=True))


def test_a_working_token_is_kept_and_a_missing_one_made() -> None:
    owner = factories.owner()
    first = machine_token(identity=owner, secret=None)
    assert identity_for_token(first) == owner
    assert machine_token(identity=owner, secret=first) == first
    assert len(active()) == 1


def test_a_revoked_or_unknown_token_is_replaced_and_the_old_ones_revoked() -> None:
    owner = factories.person()
    first = machine_token(identity=owner, secret=None)
    second = machine_token(identity=owner, secret="srn_unknown")
    assert second != first and identity_for_token(first) is None
    revoke_token(prefix_or_id=second[:8])
    third = machine_token(identity=owner, secret=second)
    assert third not in {first, second} and identity_for_token(third) == owner
    assert len(active()) == 1

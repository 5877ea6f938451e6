"""Identities and tokens: only hashes are kept; revoked tokens open nothing."""

from __future__ import annotations

import hashlib

import pytest
from django.db import IntegrityError

from runs.models import Identity, IdentityKind, Token
from runs.services.identities import (
    IdentityError,
    create_identity,
    create_token,
    identity_for_token,
    import_tokens,
    revoke_token,
)
from tests import factories

pytestmark = pytest.mark.django_db


def test_a_token_is_stored_only_as_its_sha256() -> None:
    new = factories.token(factories.person())
    stored = Token.objects.get(pk=new.token.pk)
    assert stored.hash == hashlib.sha256(new.secret.encode()).hexdigest()
    assert new.secret not in {stored.hash, stored.prefix, stored.label}
    assert new.secret.startswith(stored.prefix)


def test_a_token_finds_its_identity_and_is_marked_used() -> None:
    paul = factories.person()
    new = factories.token(paul)
    assert identity_for_token(new.secret) == paul
    assert Token.objects.get(pk=new.token.pk).last_used_at is not None


def test_an_unknown_token_finds_nobody() -> None:
    factories.token(factories.person())
    assert identity_for_token("srn_not-a-real-token") is None


def test_a_revoked_token_is_refused() -> None:
    new = factories.token(factories.person())
    revoke_token(prefix_or_id=str(new.token.pk))
    assert identity_for_token(new.secret) is None


def test_revoking_by_an_ambiguous_prefix_is_refused_and_changes_nothing() -> None:
    paul = factories.person()
    create_token(identity=paul)
    create_token(identity=paul)
    with pytest.raises(IdentityError, match="2 tokens match 'srn_'"):
        revoke_token(prefix_or_id="srn_")
    assert Token.objects.filter(revoked_at__isnull=True).count() == 2


def test_an_agent_acts_for_a_person_and_counts_as_them() -> None:
    ada = factories.agent()
    assert ada.acts_for == factories.person()
    assert ada.principal == factories.person()
    assert ada.user is None


def test_an_agent_without_a_person_is_refused() -> None:
    with pytest.raises(IdentityError, match="an agent needs acts_for"):
        create_identity(name="bot", kind=IdentityKind.AGENT)
    assert not Identity.objects.filter(name="bot").exists()


def test_the_database_refuses_an_agent_acting_for_nobody() -> None:
    with pytest.raises(IntegrityError):
        Identity.objects.create(name="bot", kind=IdentityKind.AGENT)


def test_the_lab_has_one_owner() -> None:
    factories.owner()
    with pytest.raises(IdentityError, match="the lab has an owner already"):
        create_identity(name="other", kind=IdentityKind.OWNER)


def test_the_owner_logs_in_as_a_superuser() -> None:
    olivia = factories.owner()
    assert olivia.user is not None
    assert olivia.user.is_superuser
    assert olivia.user.check_password("olivia-pw-123")


def test_a_tokens_file_creates_people_agents_and_tokens_once() -> None:
    """S17: tokens load from a YAML file of people and agents."""
    data = {
        "owner": "olivia",
        "people": [{"name": "paul", "tokens": ["srn_paul-secret"]}],
        "agents": [{"name": "ada", "acts_for": "paul", "tokens": ["srn_ada-secret"]}],
    }
    assert import_tokens(data=data) == {"identities": 3, "tokens": 2}
    assert import_tokens(data=data) == {"identities": 0, "tokens": 0}
    assert identity_for_token("srn_ada-secret") == Identity.objects.get(name="ada")
    assert Identity.objects.get(name="olivia").kind == IdentityKind.OWNER


def test_a_tokens_file_may_hold_hashes_instead_of_secrets() -> None:
    digest = hashlib.sha256(b"srn_hidden").hexdigest()
    import_tokens(data={"people": [{"name": "paul", "tokens": [f"sha256:{digest}"]}]})
    assert identity_for_token("srn_hidden") == Identity.objects.get(name="paul")


def test_a_tokens_file_with_an_unknown_key_is_refused_whole() -> None:
    with pytest.raises(IdentityError, match=r"people\[0\]: unknown key\(s\) token"):
        import_tokens(data={"people": [{"name": "paul", "token": "x"}]})
    assert not Identity.objects.exists()

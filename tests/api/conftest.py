"""Fixtures of the API tests: a client per person of the lab, real Redis, a fresh store."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pytest_django import Settings
from rest_framework.test import APIClient

from runs.backends import backend
from runs.models import Identity
from tests import factories
from tests.waiting import DEADLINE_S

REDIS_URL = os.environ.get("SIMRUN_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture(autouse=True)
def api_settings(settings: Settings, store: Path) -> Iterator[None]:
    """Real Redis for rate limits, quick event polls, a local backend of a known size."""
    settings.SIMRUN_REDIS_URL = REDIS_URL
    settings.SIMRUN_EVENTS_POLL_S = 0.05
    # a stream outlives every step a test takes while it is open (2 s of them under load were
    # seen, against the 5 s this was); tests of the maximum time set their own
    settings.SIMRUN_EVENTS_MAX_S = DEADLINE_S
    settings.SIMRUN_LOCAL_CORES = 4.0
    settings.SIMRUN_LOCAL_MEMORY_GB = 8.0
    settings.SIMRUN_BACKEND = "local"
    # the people of the lab get passwords; a fast hasher keeps their creation cheap
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    backend.cache_clear()
    yield
    backend.cache_clear()


@dataclass
class Member:
    """Someone of the lab with a client that sends their token."""

    identity: Identity
    client: APIClient
    secret: str
    token_id: int


def member(identity: Identity) -> Member:
    new = factories.token(identity)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {new.secret}")
    return Member(identity, client, new.secret, new.token.pk)


@dataclass
class Lab:
    owner: Member  # olivia
    person: Member  # paul
    other: Member  # sam
    agent: Member  # ada, acting for paul


@pytest.fixture
def lab(db: None) -> Lab:
    return Lab(
        owner=member(factories.owner()),
        person=member(factories.person()),
        other=member(factories.other_person()),
        agent=member(factories.agent()),
    )


def streamed(response: object) -> bytes:
    """The whole body of a streamed response (its first part, without the web process's edge
    to hand the rest over to)."""
    return b"".join(response.streaming_content)  # type: ignore[attr-defined]


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()

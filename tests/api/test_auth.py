"""Bearer tokens, the tier they give, and rate limits per token."""

from __future__ import annotations

import secrets
import time
from types import SimpleNamespace

import pytest
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries, Settings
from rest_framework.test import APIClient

from runs.api import throttling
from runs.models import Token
from runs.services.identities import revoke_token
from tests.api.conftest import Lab
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db


def test_a_request_without_a_token_is_refused_with_401(anonymous: APIClient) -> None:
    """S1: every API route needs a bearer token."""
    response = anonymous.get("/api/runs/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["code"] == "not_authenticated"


def test_a_revoked_token_is_refused_with_401(lab: Lab) -> None:
    """S1: a revoked token no longer opens the API."""
    assert lab.person.client.get("/api/whoami/").status_code == 200
    revoke_token(prefix_or_id=str(lab.person.token_id))
    response = lab.person.client.get("/api/whoami/")
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]


def test_a_token_revoked_elsewhere_is_refused_within_the_recheck_time(
    lab: Lab, settings: Settings
) -> None:
    """S1: a revocation by another process (the `simrun` command, another web process) holds
    here once this process checks the token again, at most SIMRUN_TOKEN_RECHECK_S later."""
    settings.SIMRUN_TOKEN_RECHECK_S = 0.2
    assert lab.person.client.get("/api/whoami/").status_code == 200
    Token.objects.filter(pk=lab.person.token_id).update(revoked_at=timezone.now())
    wait_for(
        lambda: lab.person.client.get("/api/whoami/").status_code == 401,
        timeout=10,
        what="the revocation to hold",
    )


def test_a_token_checked_moments_ago_costs_no_query(
    lab: Lab, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    """S1: within SIMRUN_TOKEN_RECHECK_S of its last check a token is not looked up again."""
    assert lab.person.client.get("/api/whoami/").status_code == 200
    with django_assert_num_queries(0):
        assert lab.person.client.get("/api/whoami/").status_code == 200


def test_a_deleted_token_is_refused_at_once(lab: Lab) -> None:
    """S1: deleting a token (in the admin, or with its identity) ends it from the next request."""
    assert lab.agent.client.get("/api/whoami/").status_code == 200
    Token.objects.get(pk=lab.agent.token_id).delete()
    assert lab.agent.client.get("/api/whoami/").status_code == 401


def test_an_unknown_token_is_refused_with_401() -> None:
    """S1: a token that was never issued is refused."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer srn_not-a-real-token")
    assert client.get("/api/whoami/").status_code == 401


def test_a_header_that_is_not_bearer_is_refused_with_a_hint(lab: Lab) -> None:
    """S1: only the bearer scheme is accepted, and the error says how to send it."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {lab.person.secret}")
    response = client.get("/api/whoami/")
    assert response.status_code == 401
    assert "Bearer" in response.json()["detail"]


@pytest.mark.parametrize(
    ("who", "tier", "acts_for"),
    [("owner", "owner", None), ("person", "person", None), ("agent", "agent", "paul")],
)
def test_the_token_decides_the_tier(lab: Lab, who: str, tier: str, acts_for: str | None) -> None:
    """S2: the identity of the token decides the priority tier of its runs."""
    body = getattr(lab, who).client.get("/api/whoami/").json()
    assert body["tier"] == tier
    assert body["acts_for"] == acts_for


def test_the_openapi_document_is_served_without_a_token(anonymous: APIClient) -> None:
    """S1: the document describes the API and holds no data, so it is public."""
    response = anonymous.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    assert "/api/runs/" in response.json()["paths"]


@pytest.fixture
def mid_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    """The throttle's clock held half way through a one-minute window: its counters are per
    window, so requests on either side of the minute's end (the real clock crossing it
    between two requests) would be counted apart and the limit never reached."""
    window = throttling.WINDOW_S
    held = time.time() // window * window + window / 2
    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: held))


@pytest.mark.usefixtures("mid_minute")
def test_requests_beyond_the_limit_get_429_with_retry_after(lab: Lab, settings: Settings) -> None:
    """S1: a token is limited per minute with an atomic counter in Redis."""
    settings.SIMRUN_RATE_LIMIT_PER_MINUTE = 3
    statuses = [lab.person.client.get("/api/whoami/").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    refused = lab.person.client.get("/api/whoami/")
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert lab.other.client.get("/api/whoami/").status_code == 200  # another token is not counted


def test_the_redis_counter_counts_every_hit_of_a_window() -> None:
    """S1: the counter is Redis's, so every process of the service shares it."""
    token = secrets.token_hex(32)
    assert throttling.hit(token, now=120.0) == (1, 60)
    assert throttling.hit(token, now=150.5) == (2, 30)
    assert throttling.hit(token, now=180.0) == (1, 60)  # a new window starts from one


def test_grants_taken_by_other_processes_count_against_the_limit() -> None:
    """S1: every web process takes its grants from the same counter, so what the others took
    in this window leaves only the rest of the limit here."""
    token = secrets.token_hex(32)
    throttling.hit(token, amount=97, now=600.0)  # other processes let 97 through
    allowed = [throttling.allow(token, limit=100, now=601.0)[0] for _ in range(5)]
    assert allowed == [True, True, True, False, False]


def test_a_process_asks_redis_once_per_batch_of_grants() -> None:
    """S1: with a limit of 1,000 a process takes 20 grants at a time; the counter shows them."""
    token = secrets.token_hex(32)
    for _ in range(21):
        assert throttling.allow(token, limit=1000, now=660.0) == (True, 60)
    assert throttling.hit(token, amount=0, now=660.0)[0] == 40


@pytest.mark.usefixtures("mid_minute")
def test_without_redis_the_limit_is_counted_in_the_process(lab: Lab, settings: Settings) -> None:
    """S1: the embedded default has no Redis; the counter is then the process's own."""
    settings.SIMRUN_REDIS_URL = ""
    settings.SIMRUN_RATE_LIMIT_PER_MINUTE = 2
    statuses = [lab.agent.client.get("/api/whoami/").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]


ROUTES = [
    ("get", "/api/runs/"),
    ("post", "/api/runs/"),
    ("get", "/api/runs/abc/"),
    ("delete", "/api/runs/abc/"),
    ("post", "/api/runs/abc/cancel/"),
    ("get", "/api/runs/abc/tasks/"),
    ("get", "/api/runs/abc/workers/"),
    ("get", "/api/runs/abc/outputs/"),
    ("get", "/api/runs/abc/outputs/download/"),
    ("get", "/api/runs/abc/logs/"),
    ("get", "/api/runs/abc/events/"),
    ("get", "/api/runs/abc/crate/"),
    ("post", "/api/runs/from_crate/"),
    ("post", "/api/validate/"),
    ("post", "/api/estimate/"),
    ("get", "/api/task-types/"),
    ("get", "/api/task-types/command/"),
    ("get", "/api/servers/"),
    ("post", "/api/cleanup/"),
    ("get", "/api/usage/"),
    ("get", "/api/compare/"),
    ("get", "/api/snapshots/"),
    ("post", "/api/snapshots/"),
    ("post", "/api/snapshots/register/"),
    ("get", "/api/snapshots/abc/"),
    ("get", "/api/whoami/"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_route_needs_a_token(anonymous: APIClient, method: str, path: str) -> None:
    """S1: every API route answers 401 without a token, before it looks at anything else."""
    response = getattr(anonymous, method)(path)
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"

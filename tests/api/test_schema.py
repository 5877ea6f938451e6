"""The OpenAPI document against the API itself: schemathesis finds no server error and no
answer that breaks the document."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests import factories
from tests.api import scenes
from tests.api.archives import tar_files, zip_of
from tests.api.conftest import Lab

schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())
SOURCES = {"model/m.py": b"x = 1\n"}
for media, archive in [
    ("application/x-tar", tar_files(SOURCES)),
    ("application/gzip", tar_files(SOURCES, gz=True)),
    ("application/zip", zip_of(SOURCES)),
]:
    schemathesis.openapi.media_type(
        media, st.one_of(st.just(archive), st.just(tar_files({"../x": b"x"})), st.binary())
    )
CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    content_type_conformance,
]


@pytest.fixture
def known(lab: Lab, settings: object) -> Iterator[dict[str, str]]:
    """Real rows for path parameters, a generous rate limit, short streams.

    The WSGI app is called directly, so, as Django's own test client does, its requests must
    not close the connection that holds the test's transaction.
    """
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    settings.SIMRUN_RATE_LIMIT_PER_MINUTE = 1_000_000  # type: ignore[attr-defined]
    settings.SIMRUN_EVENTS_MAX_S = 0.2  # type: ignore[attr-defined]
    run = scenes.split_run(by=lab.person.identity, units=3)
    scenes.work(run, "scan-w0", done=1)
    factories.run(by=lab.person.identity, state="succeeded")
    try:
        yield {"id": run.id, "secret": lab.person.secret}
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@pytest.mark.django_db
def test_the_api_keeps_to_its_document(case: schemathesis.Case, known: dict[str, str]) -> None:
    """S1-S16: every route answers as its OpenAPI document says, never with a server error."""
    if "id" in (case.path_parameters or {}):
        generated = str(case.path_parameters["id"])  # type: ignore[index]
        if hashlib.sha256(generated.encode()).digest()[0] % 2 == 0:
            case.path_parameters["id"] = known["id"]  # type: ignore[index]
    case.call_and_validate(headers={"Authorization": f"Bearer {known['secret']}"}, checks=CHECKS)

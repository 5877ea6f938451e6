"""The OpenAPI document against the API itself: schemathesis with all its default checks (no
server error, answers as documented, schema-valid requests accepted, schema-violating ones
refused, auth enforced, unsupported methods 405), a few examples per route.

Uploads get archives from a strategy of our own (`archives`): file trees packed as tar,
tar.gz or zip, and hostile ones (a member outside the archive, a link, a name twice).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from pytest_django import Settings
from schemathesis.config import SchemathesisConfig

from runs.services.identities import import_tokens
from tests import factories
from tests.api import scenes
from tests.api.archives import tar_files, tar_member, tar_of, zip_of
from tests.api.conftest import Lab

# A request can be schema-valid and still be refused for what no schema can say: a workflow
# whose tasks do not fit together (to run it, estimate it or explain its reuse), a snapshot
# that does not exist, a node that is not there, an archive member pointing outside it, a zip
# that is no crate, a byte range beyond a file, a NUL character in a workflow's key. On these
# routes a 400 (416 for ranges) is expected of valid requests too; `refused_for_its_meaning`
# checks that such a 400 is one of the domain's refusals, never a complaint about the
# request's form.
CONFIG = SchemathesisConfig.from_str(
    """
[[operations]]
include-operation-id = [
  "runs_create", "estimate_create", "explain_reuse_create", "snapshots_create",
  "validate_create", "runs_from_crate"
]
checks.positive_data_acceptance.expected-statuses = [
  "2xx", "400", "401", "403", "404", "409", "429"
]

[[operations]]
include-operation-id = "runs_outputs_download_retrieve"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "416", "429"]
"""
)
SEMANTIC = {
    "runs_create": {"workflow_invalid", "workflow_refused", "submission_refused", "plan_refused"},
    "explain_reuse_create": {
        "workflow_invalid",
        "workflow_refused",
        "submission_refused",
        "plan_refused",
    },
    "estimate_create": {
        "workflow_invalid",
        "workflow_refused",
        "submission_refused",
        "plan_refused",
    },
    "snapshots_create": {"upload_refused", "snapshot_refused"},
    # an archive of random files is no crate
    "runs_from_crate": {"upload_refused", "crate_refused"},
    # a workflow is free-form JSON: a NUL or a lone surrogate in a key is refused for its text
    "validate_create": {"workflow_invalid", "workflow_refused"},
}
schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application(), config=CONFIG)

_segment = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
_path = st.lists(_segment, min_size=1, max_size=3).map("/".join)
_files = st.dictionaries(_path, st.binary(max_size=64), min_size=1, max_size=4).filter(
    lambda files: (
        not any(other.startswith(name + "/") for name in files for other in files)
    )  # a file is nobody's folder
)
_hostile_members = st.sampled_from(
    [
        [tar_member("../outside", b"x")],
        [tar_member("/etc/passwd", b"x")],
        [tar_member("a", b"x"), tar_member("link", kind=b"2", link="../../etc/passwd")],
        [tar_member("twice", b"x"), tar_member("twice", b"y")],
    ]
)


def archives(media: str) -> st.SearchStrategy[bytes]:
    """Archives of file trees of the media type, now and then a hostile one."""
    if media == "application/zip":
        good = _files.map(zip_of)
        bad = st.just(zip_of({"../outside": b"x"}))
    else:
        gz = media == "application/gzip"
        good = _files.map(lambda files: tar_files(files, gz=gz))
        bad = _hostile_members.map(lambda members: tar_of(members, gz=gz))
    return st.one_of(good, good, good, bad)


for _media in ("application/x-tar", "application/gzip", "application/zip"):
    schemathesis.openapi.media_type(_media, archives(_media))

TOKEN = "srn_schemathesis-person-token"
"""A token of the test's person, known before the cases are made (some are made at collection)."""


@schema.auth()
class Bearer:
    """The person's token, where the document asks for one."""

    def get(self, case: schemathesis.Case, ctx: Any) -> str:
        return TOKEN

    def set(self, case: schemathesis.Case, data: str, ctx: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@schemathesis.check
def refused_for_its_meaning(ctx: Any, response: Any, case: schemathesis.Case) -> bool | None:
    """A 400 of a route that refuses valid requests for their meaning names that refusal."""
    expected = SEMANTIC.get(case.operation.definition.raw.get("operationId", ""))
    positive = case.meta is not None and case.meta.generation.mode.is_positive
    if expected is None or response.status_code != 400 or not positive:
        return None
    code = response.json().get("code")
    assert code in expected, f"400 {code!r} is no refusal of the request's meaning: {response.text}"
    return None


@pytest.fixture
def known(lab: Lab, settings: Settings) -> Iterator[dict[str, str]]:
    """Real rows for path parameters, a generous rate limit, short streams.

    The WSGI app is called directly, so, as Django's own test client does, its requests must
    not close the connection that holds the test's transaction.
    """
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    settings.SIMRUN_RATE_LIMIT_PER_MINUTE = 1_000_000
    settings.SIMRUN_EVENTS_MAX_S = 0.2
    # the same token in every test names a new identity each time: never answer from memory
    settings.SIMRUN_TOKEN_RECHECK_S = 0
    run = scenes.split_run(by=lab.person.identity, units=3)
    scenes.work(run, "scan-w0", done=1)
    factories.run(by=lab.person.identity, state="succeeded")
    import_tokens(data={"people": [{"name": lab.person.identity.name, "tokens": [TOKEN]}]})
    try:
        yield {"id": run.id}
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
    """S1-S16: every route answers as its OpenAPI document says, with all of schemathesis's
    default checks."""
    if "id" in (case.path_parameters or {}):
        generated = str(case.path_parameters["id"])  # type: ignore[index]
        if hashlib.sha256(generated.encode()).digest()[0] % 2 == 0:
            case.path_parameters["id"] = known["id"]  # type: ignore[index]
    case.call_and_validate()


def test_the_document_lets_every_optional_filter_be_given_empty() -> None:
    """S1: the API reads an optional query parameter given empty (`?limit=`) as not given,
    and its document says so: the empty text is valid for each (as `anyOf`; a `oneOf` whose
    alternatives both take it would call it invalid)."""
    document = SchemaGenerator().get_schema(request=None, public=True)
    optional = [
        (path, parameter)
        for path, operations in document["paths"].items()
        for operation in operations.values()
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "query" and not parameter.get("required")
    ]

    assert {p["name"] for _, p in optional} >= {"limit", "cursor", "state", "tail", "follow"}
    for path, parameter in optional:
        errors = list(Draft202012Validator(parameter["schema"]).iter_errors(""))
        assert not errors, f"{path} ?{parameter['name']}=: {errors[0].message}"


def test_property_tests_draw_the_same_examples_at_every_run() -> None:
    """A run of the test suite does not fail by the luck of its draw: Hypothesis draws
    repeatably unless SIMRUN_HYPOTHESIS=fuzz (docs/testing.md)."""
    assert settings.default.derandomize

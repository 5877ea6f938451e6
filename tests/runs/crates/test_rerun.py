"""A crate made into a run again (`submit --from-crate`): its workflow, snapshots and settings
recreated from the crate alone, in an installation that never saw the run it records."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from pytest_django import Settings

from runs.crates.validation import METADATA_FILE
from runs.environments import environment_digest, harness_identity, python_version
from runs.models import Snapshot
from runs.plans import Node
from runs.services.crate_runs import submit_crate
from runs.services.submission import environment_of
from runs.store import store
from tests import factories
from tests.runs.crates.crate_files import (
    LIMITS,
    crate_members,
    fresh_installation,
    rewrite_digest,
    written,
    zipped,
)
from tests.runs.crates.scenes import WORKFLOW, finished_scan

pytestmark = pytest.mark.django_db
NODES = [Node("here", 4, 16)]


def test_a_crate_from_another_installation_makes_its_run_again(
    store: Path, tmp_path: Path, settings: Settings
) -> None:
    original = finished_scan()
    members = crate_members(original, tmp_path)
    model = original.sources[0]
    fresh_installation(settings, tmp_path)
    archive = written(zipped(members), tmp_path / "crate.zip")

    run, _ = submit_crate(
        identity=factories.other_person(), archive=archive, nodes=NODES, limits=LIMITS
    )

    assert run.pk != original.pk and run.state == "submitting"
    assert run.workflow["tasks"][0]["settings"] == WORKFLOW["tasks"][0]["settings"]
    assert [t.task_id for t in run.tasks.order_by("position")] == ["scan", "summary"]
    assert run.sources == [model]
    snapshot = Snapshot.objects.get(digest=model)
    assert snapshot.name == "repressilator" and snapshot.files == 3
    ant = store_file(f"snapshots/{model}/repressilator.ant")
    assert ant == members[f"snapshots/{model}/repressilator.ant"]
    metadata = hashlib.sha256(members[METADATA_FILE]).hexdigest()
    assert run.from_crate == f"simrun-run:{original.pk} sha256:{metadata}"
    assert run.reuse is False  # a re-run computes: that is what it is for


def test_the_crates_constraints_are_what_the_environment_is_resolved_under(
    store: Path, tmp_path: Path, settings: Settings
) -> None:
    members = crate_members(finished_scan(), tmp_path)
    pins = b"pydantic==2.0.0\n"  # not what this installation would pin
    rewrite_digest(members, "environment/constraints.txt", pins)
    fresh_installation(settings, tmp_path)

    run, _ = submit_crate(
        identity=factories.person(),
        archive=written(zipped(members), tmp_path / "crate.zip"),
        nodes=NODES,
        limits=LIMITS,
    )

    ref, context = environment_of(run)
    assert context["constraints.txt"] == pins
    assert ref == environment_digest(context, python_version(), harness_identity())
    assert environment_of(finished_scan())[0] != ref  # a model submitted here: this one's pins


def store_file(path: str) -> bytes:
    return (store().root / path).read_bytes()

"""Records round-trip through Postgres and keep their constraints."""

from __future__ import annotations

import re

import pytest
from django.db import IntegrityError

from runs.models import ResourceObservation, Run, Snapshot, Task
from runs.models.run import new_run_id
from runs.states import RunState
from tests import factories

pytestmark = pytest.mark.django_db


def test_a_run_round_trips_with_its_json_fields() -> None:
    record = factories.run(oom_kills={"scan-w0": [0]})
    loaded = Run.objects.get(pk=record.pk)
    assert loaded.oom_kills == {"scan-w0": [0]}
    assert loaded.workflow_name == f"simrun-{record.id}"
    assert loaded.tasks.get().task_id == "hello"


def test_run_ids_are_valid_kubernetes_names() -> None:
    ids = [new_run_id() for _ in range(50)]
    assert all(re.fullmatch(r"[a-z0-9]{8,24}", i) for i in ids)


def test_run_ids_made_in_the_same_millisecond_stay_distinct() -> None:
    """Thousands made in a tight loop (hundreds share each millisecond) never meet."""
    ids = [new_run_id() for _ in range(30_000)]
    assert len(set(ids)) == len(ids)


def test_a_task_id_is_unique_within_its_run() -> None:
    record = factories.run()
    with pytest.raises(IntegrityError):
        Task.objects.create(run=record, task_id="hello", position=1, type="command")


def test_an_idempotency_key_is_unique_per_identity() -> None:
    paul = factories.person()
    factories.run(by=paul, idempotency_key="k1")
    factories.run(by=factories.other_person(), idempotency_key="k1")
    with pytest.raises(IntegrityError):
        factories.run(by=paul, idempotency_key="k1")


def test_an_observation_of_one_attempt_is_kept_once() -> None:
    record = factories.run()
    values = {"task_type": "scan", "run": record, "task_id": "scan", "worker": "scan-w0"}
    ResourceObservation.objects.create(**values, attempt=0)
    ResourceObservation.objects.create(**values, attempt=1)
    with pytest.raises(IntegrityError):
        ResourceObservation.objects.create(**values, attempt=0)


def test_a_snapshot_digest_is_unique() -> None:
    Snapshot.objects.create(digest="a" * 64)
    with pytest.raises(IntegrityError):
        Snapshot.objects.create(digest="a" * 64)


def test_live_and_ended_states_partition_the_run_states() -> None:
    assert set(RunState.live()) | set(RunState.ended()) == set(RunState)
    assert not set(RunState.live()) & set(RunState.ended())

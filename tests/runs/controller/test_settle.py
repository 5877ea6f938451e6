"""Settling an ended run: logs, stop, release; unknown things count as done (C19)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.local.backend import LocalBackend
from runs.models import Run
from runs.services.settle import settle
from tests import factories

pytestmark = pytest.mark.django_db


def test_an_unknown_workflow_and_node_count_as_cancelled_and_released(store: Path) -> None:
    """C19: an unknown node counts as released, an unknown workflow as cancelled."""
    run = factories.run(
        state="failed",
        reserve="no-such-node",
        reserved=True,
        pending_cancel=True,
        pending_release=True,
        pending_logs=True,
    )
    settle(run.pk, LocalBackend(store, cores=2, memory_gb=2))
    run.refresh_from_db()
    assert (run.pending_cancel, run.pending_release, run.pending_logs) == (False, False, False)


def test_a_live_run_is_not_settled(store: Path) -> None:
    """C13: settling is for ended runs only."""
    run = factories.run(state="running", pending_cancel=True)
    settle(run.pk, LocalBackend(store, cores=2, memory_gb=2))
    assert Run.objects.get(pk=run.pk).pending_cancel is True


def test_a_deleted_run_is_ignored(store: Path) -> None:
    """C19: settling a run deleted meanwhile fails no step and leaves nothing in the store."""
    assert settle("gone", LocalBackend(store, cores=2, memory_gb=2)) == []
    assert not (store / "runs" / "gone").exists()

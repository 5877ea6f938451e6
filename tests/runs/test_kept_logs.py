"""Every attempt's log is kept, and shown: one whose log the backend cannot read yet while it
runs is kept once it has ended, never as "not available"."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.local.backend import LocalBackend
from runs.ports import PodLog
from runs.services.settle import keep_task_logs
from runs.store import task_paths
from tests import factories

pytestmark = pytest.mark.django_db


class LateLog(LocalBackend):
    """The real backend, but its pod's second attempt has started without a log yet (an
    attempt started as the task ended), and ends with one once asked again."""

    asked = 0

    def logs(self, workflow_name: str, task_id: str, **kwargs: object) -> list[PodLog]:
        self.asked += 1
        if self.asked == 1:
            return [
                PodLog("t-w0", 0, "first\n", ended=True),
                PodLog("t-w0", 1, ended=False, error="no log yet"),
            ]
        return [PodLog("t-w0", 0, "first\n", ended=True), PodLog("t-w0", 1, "second\n", True)]


def test_an_attempt_whose_log_is_not_readable_yet_is_kept_once_it_ended(store: Path) -> None:
    run = factories.run(by=factories.person(), state="failed")
    task = run.tasks.create(task_id="t", position=0, type="sleep", splittable=True)
    backend = LateLog(store, cores=2, memory_gb=2)
    task_paths(run.pk, "t").root.mkdir(parents=True)

    assert keep_task_logs(run, task, backend) is False  # an attempt still runs
    assert keep_task_logs(run, task, backend) is True

    logs = task_paths(run.pk, "t").logs
    assert (logs / "t-w0-1.log").read_text() == "second\n"
    assert (logs / "t-w0-0.log").read_text() == "first\n"

"""`simrun follow` tells the truth about a run and what advances it (`show`'s times of each
task: tests/runs/cli/test_commands.py).

The command runs as a user runs it (a subprocess on the test database); the services are
started and stopped around it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runs.models import Run
from tests.e2e.commands import ROOT, SIMRUN
from tests.e2e.conftest import Services
from tests.e2e.test_local_runs import SCAN, submit
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]


def over_api(services: Services) -> dict[str, str]:
    """The services' environment and the API served in this process (`simrun_api`)."""
    return {**services.env, **{k: os.environ[k] for k in ("SIMRUN_URL", "SIMRUN_TOKEN")}}


def test_follow_says_the_controller_is_not_running_then_follows_once_it_is(
    simrun_api: str, stopped_services: Services, tmp_path: Path
) -> None:
    """With no service running, `follow` says so at once with the command
    that starts them, goes on following when they come up, and ends with the run's time
    from submission as its record has it."""
    run = submit({"name": "followed", "tasks": [SCAN]})
    out = tmp_path / "follow.out"
    with out.open("w") as stdout:
        follow = subprocess.Popen(
            [str(SIMRUN), "follow", run.pk],
            cwd=ROOT,
            env=over_api(stopped_services),
            stdout=stdout,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        warned = wait_for(
            lambda: "start them with `simrun serve`" in out.read_text(),
            timeout=30,
            what="follow to say the services are not running",
        )
        assert warned
        assert follow.poll() is None  # still following
        stopped_services.start("worker")
        stopped_services.start("watcher")
        code = follow.wait(timeout=240)
    finally:
        if follow.poll() is None:
            follow.kill()
    said = out.read_text()
    assert code == 0, said
    assert "simrun's controller has never reconciled" in said
    assert f"the controller is reconciling again; following run {run.pk}" in said
    run = Run.objects.get(pk=run.pk)
    assert run.ended_at is not None
    took = (run.ended_at - run.created_at).total_seconds()
    assert f"run {run.pk} succeeded {took:.1f}s after submission" in said

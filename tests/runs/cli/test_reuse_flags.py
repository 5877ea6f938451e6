"""`simrun submit --resume RUN` and `--no-reuse` (docs/reuse.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runs.backends import backend
from runs.cli.main import main
from runs.models import Run


@pytest.fixture
def workflow(simrun_api: str, settings: object, tmp_path: Path) -> Iterator[Path]:
    settings.SIMRUN_BACKEND = "local"  # type: ignore[attr-defined]
    backend.cache_clear()
    path = tmp_path / "hello.yaml"
    path.write_text(
        "name: hello\ntasks:\n  - {id: hello, type: command, settings: {args: [echo]}}\n"
    )
    yield path
    backend.cache_clear()


def test_submit_records_no_reuse_and_the_run_resumed(workflow: Path) -> None:
    assert main(["submit", str(workflow), "--no-reuse"]) == 0
    first = Run.objects.get()
    assert (first.reuse, first.resume_from) == (False, "")

    assert main(["submit", str(workflow), "--resume", first.pk]) == 0

    resumed = Run.objects.exclude(pk=first.pk).get()
    assert (resumed.reuse, resumed.resume_from) == (True, first.pk)


def test_resuming_a_run_that_does_not_exist_exits_1_creating_nothing(
    workflow: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["submit", str(workflow), "--resume", "nosuch"]) == 1
    assert "resume_from: no run 'nosuch'" in capsys.readouterr().err
    assert not Run.objects.exists()


def test_explain_reuse_says_which_setting_differs_and_submits_nothing(
    workflow: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--explain-reuse` asks the API (`POST /api/explain-reuse/`) and prints, per task, what
    a submission would reuse and the first part of the key that differs."""
    from runs.services.reuse import plan_reuse

    naps = workflow.with_name("naps.yaml")
    naps.write_text("name: naps\ntasks:\n  - {id: nap, type: sleep, settings: {units: 3}}\n")
    assert main(["submit", str(naps)]) == 0
    first = Run.objects.get()
    plan_reuse(run_id=first.pk, environment="service")  # as its submission does
    naps.write_text(
        "name: naps\ntasks:\n  - {id: nap, type: sleep, settings: {units: 3, seconds: 2}}\n"
    )
    capsys.readouterr()

    assert main(["submit", str(naps), "--explain-reuse"]) == 0

    assert capsys.readouterr().out.splitlines() == [
        "would reuse 0 of 3 units (nothing submitted)",
        f"  nap                      reused 0 of 3: setting 'seconds' differs from run "
        f"{first.pk}'s (2.0 here, 0.1 there)",
    ]
    assert Run.objects.count() == 1

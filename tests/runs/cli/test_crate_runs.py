"""`simrun submit --from-crate`, `simrun show`'s lineage and `simrun compare`'s verdict on the
outputs: what a person typing them sees, through the API."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest
from pytest_django import Settings
from rich.console import Console

from runs.cli.main import main
from runs.cli.run_commands import outputs_verdict
from runs.cli.transfers import transfer_bar
from runs.models import Run
from runs.services.crates import export_to
from tests.runs.crates.crate_files import Installation, fresh_installation
from tests.runs.crates.scenes import finished_scan


def exported_then_moved(tmp_path: Path, settings: Settings) -> tuple[Run, Path]:
    """A finished scan's crate as a directory, and a fresh installation to bring it into."""
    run = finished_scan()
    crate = export_to(run_id=run.pk, target=tmp_path / "crate")
    fresh_installation(settings, tmp_path)
    return run, crate


def test_a_crate_directory_is_sent_and_run_again(
    simrun_api: str, tmp_path: Path, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    original, crate = exported_then_moved(tmp_path, settings)

    assert main(["submit", "--from-crate", str(crate), "--group", "replication"]) == 0

    run = Run.objects.exclude(pk=original.pk).get()
    said = capsys.readouterr().out
    assert said == (
        f"submitted run {run.pk} ({original.name}), a re-run of crate {run.from_crate}\n"
    )
    assert run.from_crate.startswith(f"simrun-run:{original.pk} sha256:")
    assert (run.group, run.reuse) == ("replication", False)


def test_show_says_whether_a_run_is_a_crates_re_run_and_how_often_it_was_exported(
    simrun_api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = finished_scan()
    export_to(run_id=original.pk, target=tmp_path / "one.zip")
    again = finished_scan(from_crate="simrun-run:0abc sha256:" + "e" * 64)

    assert main(["show", original.pk]) == 0
    assert "  submitted here; exported 1 time\n" in capsys.readouterr().out
    assert main(["show", again.pk]) == 0
    assert f"  re-run of crate simrun-run:0abc sha256:{'e' * 64}; exported 0 times\n" in (
        capsys.readouterr().out
    )


def test_a_crate_that_was_changed_is_refused_naming_the_file_and_changes_nothing(
    simrun_api: str, tmp_path: Path, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    _, crate = exported_then_moved(tmp_path, settings)
    (crate / "workflow.json").write_text("{}")
    before = Installation.now(Path(settings.SIMRUN_STORE))

    assert main(["submit", "--from-crate", str(crate)]) == 1

    assert capsys.readouterr().err.startswith("simrun: file 'workflow.json': its SHA-256 is ")
    assert Installation.now(Path(settings.SIMRUN_STORE)) == before


def test_a_crate_directory_holding_a_link_is_refused_before_anything_is_sent(
    simrun_api: str, tmp_path: Path, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    _, crate = exported_then_moved(tmp_path, settings)
    os.symlink("/etc/passwd", crate / "tasks" / "scan" / "out" / "passwd")

    assert main(["submit", "--from-crate", str(crate)]) == 1

    link = crate / "tasks" / "scan" / "out" / "passwd"
    assert capsys.readouterr().err == f"simrun: {link}: a link; a crate holds files only\n"
    assert Run.objects.count() == 0


def test_a_workflow_and_a_crate_together_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    crate = tmp_path / "crate.zip"
    zipfile.ZipFile(crate, "w").close()

    assert main(["submit", "study.yaml", "--from-crate", str(crate)]) == 1

    assert "--from-crate: the crate holds the workflow and its sources" in capsys.readouterr().err


def test_compare_says_the_outputs_are_identical_only_when_every_file_is() -> None:
    def row(key: str, *values: str | None) -> dict[str, object]:
        return {"key": key, "values": list(values), "differs": len(set(values)) > 1}

    same = [row("scan/scan.nc", "ab" * 32, "ab" * 32), row("summary/s.json", "cd", "cd")]
    assert outputs_verdict(same) == "outputs: identical (2 files, byte for byte)"
    assert outputs_verdict([*same, row("summary/extra.txt", None, "ef")]) == (
        "outputs: 1 of 3 files differ"
    )
    skipped = [row("(not compared)", "more than 2000 output files", None)]
    assert outputs_verdict(skipped) == "outputs: not compared (more than 2000 output files)"


def test_a_long_transfer_draws_a_bar_of_the_bytes_moved_in_a_terminal() -> None:
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=100)

    with transfer_bar("sending crate.zip", 4 * 1024**2, terminal) as moved:
        moved(1024**2)
        moved(4 * 1024**2)

    drawn = screen.getvalue()
    assert "sending crate.zip" in drawn and "4.2/4.2 MB" in drawn


def test_no_bar_is_drawn_where_no_terminal_shows_it() -> None:
    screen = io.StringIO()

    with transfer_bar("sending crate.zip", 100, Console(file=screen)) as moved:
        moved(100)

    assert screen.getvalue() == ""

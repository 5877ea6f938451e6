"""`simrun crate validate` and `simrun export`: what a person typing them sees (a valid crate
validated through the command: tests/e2e/test_crates.py)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from runs.cli.main import main
from tests.runs.cli.test_commands import simrun
from tests.runs.crates.scenes import finished_scan


def test_crate_validate_refuses_a_file_that_is_no_zip(tmp_path: Path) -> None:
    bogus = tmp_path / "crate.zip"
    bogus.write_text("not a zip")

    result = simrun("crate", "validate", str(bogus))

    assert result.returncode == 1
    assert "not a zip archive (a crate is a zip or a directory)" in result.stderr


def test_crate_validate_refuses_a_zip_with_a_link_member(tmp_path: Path) -> None:
    crate = tmp_path / "crate.zip"
    with zipfile.ZipFile(crate, "w") as zipped:
        zipped.writestr("ro-crate-metadata.json", "{}")
        link = zipfile.ZipInfo("data.txt")
        link.external_attr = (0o120777) << 16
        zipped.writestr(link, "ro-crate-metadata.json")

    result = simrun("crate", "validate", str(crate))

    assert result.returncode == 1
    assert "member 'data.txt': a link; a crate holds files only" in result.stderr


def test_crate_validate_of_a_directory_without_metadata_says_so(tmp_path: Path) -> None:
    result = simrun("crate", "validate", str(tmp_path))

    assert result.returncode == 1
    assert "no ro-crate-metadata.json: not an RO-Crate" in result.stderr


def test_crate_validate_of_a_crate_that_fails_prints_the_verdict_and_exits_1(
    tmp_path: Path,
) -> None:
    """A crate that reads (RO-Crate 1.1 metadata) but describes a file it does not hold."""
    crate = tmp_path / "crate"
    crate.mkdir()
    graph = [
        {
            "@id": "ro-crate-metadata.json",
            "@type": "CreativeWork",
            "conformsTo": {"@id": "https://w3id.org/ro/crate/1.1"},
            "about": {"@id": "./"},
        },
        {
            "@id": "./",
            "@type": "Dataset",
            "name": "a crate without its data",
            "description": "It describes data.csv and does not hold it.",
            "datePublished": "2026-11-02T09:30:00+00:00",
            "license": {"@id": "#license"},
            "hasPart": [{"@id": "data.csv"}],
        },
        {"@id": "#license", "@type": "CreativeWork", "name": "Not stated"},
        {"@id": "data.csv", "@type": "File", "name": "data.csv"},
    ]
    metadata = {"@context": "https://w3id.org/ro/crate/1.1/context", "@graph": graph}
    (crate / "ro-crate-metadata.json").write_text(json.dumps(metadata))

    result = simrun("crate", "validate", str(crate))

    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "ro-crate-1.1: NOT valid at the REQUIRED level (1 issues)",
        "  ro-crate-1.1_12.1 [REQUIRED] : The RO-Crate does not include the Data Entity "
        "'data.csv' as part of its payload",
        "not valid",
    ]


def test_export_writes_the_crate_where_asked(
    simrun_api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = finished_scan()

    assert main(["export", run.pk, "--out", str(tmp_path / "c.zip"), "--metadata-only"]) == 0

    assert capsys.readouterr().out == f"exported run {run.pk} to {tmp_path / 'c.zip'}\n"
    with zipfile.ZipFile(tmp_path / "c.zip") as zipped:
        names = zipped.namelist()
    assert {"ro-crate-metadata.json", "workflow.json"} <= set(names)
    assert not [n for n in names if n.startswith(("tasks/", "snapshots/"))]  # metadata only


def test_export_with_outputs_into_a_new_directory_holds_every_file(
    simrun_api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = finished_scan()
    (tmp_path / "exports").mkdir()
    target = tmp_path / "exports" / "crate"

    assert main(["export", run.pk, "--out", str(target), "--with-outputs"]) == 0

    assert capsys.readouterr().out == f"exported run {run.pk} to {target}\n"
    held = {str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()}
    assert {
        "ro-crate-metadata.json",
        "workflow.json",
        "environment/pyproject.toml",
        "tasks/scan/out/scan.json",
        "tasks/summary/out/summary.json",
        "tasks/scan/logs/scan-w0-0.log",
    } <= held
    assert any(p.startswith("snapshots/") and p.endswith("repressilator.ant") for p in held)
    assert list(target.parent.iterdir()) == [target]  # the zip it came as is gone


def test_export_of_a_live_run_says_why_and_exits_1(
    simrun_api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = finished_scan(state="queued")

    assert main(["export", run.pk, "--out", str(tmp_path / "c.zip")]) == 1

    assert "is queued: a crate records an ended run" in capsys.readouterr().err
    assert not (tmp_path / "c.zip").exists()

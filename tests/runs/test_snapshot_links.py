"""A snapshot's own files read by the service never through a link: its manifest (which file
differs, for reuse) and its pyproject.toml (the local packages) read as absent when a link
holds their place, and nothing behind the link is read (docs/security.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from runs.local_packages import local_packages
from runs.reuse_plans import differing_file
from runs.snapshots import MANIFEST, snapshot_directory
from simrun_harness.layout import StorePaths


def model(folder: Path, text: str) -> Path:
    (folder / "plugin" / "src").mkdir(parents=True)
    (folder / "plugin" / "src" / "m.py").write_text("x = 1\n")
    (folder / "m.py").write_text(text)
    return folder


def test_a_manifest_replaced_by_a_link_reads_as_absent(store: Path, tmp_path: Path) -> None:
    """The linked manifest names a file of someone else's: it never shows as the difference."""
    mine = snapshot_directory(StorePaths(store), model(tmp_path / "a", "x = 1\n")).digest
    theirs = snapshot_directory(StorePaths(store), model(tmp_path / "b", "x = 2\n")).digest
    outside = tmp_path / "someone-elses.json"
    outside.write_text(json.dumps([["aaa-their-private-file", "0" * 64, 1, False]]))
    manifest = store / "snapshots" / mine / MANIFEST
    manifest.unlink()
    os.symlink(outside, manifest)

    assert differing_file(mine, theirs) == "m.py"


def test_a_pyproject_replaced_by_a_link_reads_as_absent(tmp_path: Path) -> None:
    """The linked pyproject.toml names a local package the model has: none is read."""
    snapshot = model(tmp_path / "store" / "snapshots" / ("ab" * 32), "x = 1\n")
    outside = tmp_path / "pyproject.toml"
    outside.write_text(
        "[project]\nname = 'm'\nversion = '0'\ndependencies = ['plug']\n"
        "[tool.uv.sources]\nplug = { path = 'plugin' }\n"
    )
    os.symlink(outside, snapshot / "pyproject.toml")

    assert local_packages(snapshot) == []

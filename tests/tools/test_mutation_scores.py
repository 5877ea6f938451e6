"""The mutation scores docs/testing.md gives are scores of the code as it is.

`tools/mutation.py NAME --record` keeps each scored module's score with a SHA-256 digest of
every file it mutated (`tools/mutation_scores.json`). A module changed since then fails here
until it is scored again; every module the scores table names is recorded, and the table
gives what was recorded. Plain files, no database."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCORES = ROOT / "tools" / "mutation_scores.json"
TESTING = ROOT / "docs" / "testing.md"


def recorded() -> dict[str, dict[str, Any]]:
    scores: dict[str, dict[str, Any]] = json.loads(SCORES.read_text())
    return scores


def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_tool", ROOT / "tools" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_scored_module_is_the_code_its_score_was_measured_on() -> None:
    changed = [
        f"{path} (`{name}`, scored {entry['date']} at {entry['commit']})"
        for name, entry in recorded().items()
        for path, digest in entry["digests"].items()
        if hashlib.sha256((ROOT / path).read_bytes()).hexdigest() != digest
    ]
    assert not changed, (
        "changed since its mutation score was taken: "
        + "; ".join(changed)
        + ". Score it again: `.venv-mutation/bin/python tools/mutation.py NAME --record` "
        "(docs/testing.md), and give the new score there."
    )


def test_every_module_the_scores_name_is_recorded_with_the_files_it_mutates() -> None:
    modules = tool().MODULES
    scores = recorded()
    assert set(tool().SCORED) <= set(scores)
    for name, entry in scores.items():
        sources = {str(modules[name].source(path).relative_to(ROOT)) for path in modules[name].paths}
        assert set(entry["digests"]) == sources, name


def test_the_scores_table_gives_each_recorded_score() -> None:
    text = TESTING.read_text()
    for name, entry in recorded().items():
        [path] = entry["digests"] if len(entry["digests"]) == 1 else [None]
        row = next((line for line in text.splitlines() if path and f"`{path}`" in line and "|" in line and re.search(r"\d+/\d+", line)), "")
        assert f"{entry['killed']}/{entry['total']}" in row, f"{name}: no row with its score"

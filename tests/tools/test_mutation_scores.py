"""The mutation scores docs/testing.md gives stand for the code as it is.

`tools/mutation.py --record` keeps each module's score in `tools/mutation_scores.json` with a
SHA-256 digest of every file it mutated. A scored file changed since (its score then says
nothing of it) fails here until the module is scored again; the table of docs/testing.md
gives each recorded score and its commit, and names every module the tool scores, those not
yet scored saying so. Plain files, no database."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCORES = ROOT / "tools" / "mutation_scores.json"
TESTING = ROOT / "docs" / "testing.md"
NOT_SCORED = "not scored"


def recorded() -> dict[str, dict[str, Any]]:
    return json.loads(SCORES.read_text()) if SCORES.exists() else {}


def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_tool", ROOT / "tools" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def table_rows() -> dict[str, str]:
    """The rows of the scores table, by the module's name in the tool (`| \\`plans\\` | …`)."""
    rows = {}
    for line in TESTING.read_text().splitlines():
        found = re.match(r"\| `([\w-]+)` \|", line)
        if found:
            rows[found.group(1)] = line
    return rows


def changed_files(entry: dict[str, Any]) -> list[str]:
    return [
        path
        for path, digest in entry["digests"].items()
        if not (ROOT / path).exists()
        or hashlib.sha256((ROOT / path).read_bytes()).hexdigest() != digest
    ]


@pytest.mark.parametrize("name", sorted(recorded()))
def test_a_scored_module_is_unchanged_since_its_score_was_taken(name: str) -> None:
    entry = recorded()[name]
    assert changed_files(entry) == [], (
        f"{name} was scored on {entry['commit']} ({entry['date']}) and changed since: score it "
        f"again (tools/mutation.py {name} --record, docs/testing.md) and give the new score"
    )


def test_a_changed_file_is_told_apart_from_its_recorded_digest(tmp_path: Path) -> None:
    """The check itself: a digest that is not the file's is found, one that is is not."""
    path = "runs/plans.py"
    digest = hashlib.sha256((ROOT / path).read_bytes()).hexdigest()
    assert changed_files({"digests": {path: digest}}) == []
    assert changed_files({"digests": {path: "0" * 64}}) == [path]
    assert changed_files({"digests": {"runs/no_such_module.py": digest}}) == [
        "runs/no_such_module.py"
    ]


def test_the_table_gives_each_recorded_score_with_its_commit() -> None:
    rows = table_rows()
    for name, entry in recorded().items():
        assert name in rows, f"docs/testing.md's scores table has no row for {name}"
        row = rows[name]
        assert f"{entry['killed']}/{entry['total']}" in row, (name, row)
        assert f"`{entry['commit']}`" in row, (name, row)


def test_every_module_the_tool_scores_has_a_row_saying_its_score_or_that_it_has_none() -> None:
    rows, scores = table_rows(), recorded()
    for name in tool().SCORED:
        assert name in rows, f"docs/testing.md's scores table has no row for {name}"
        if name not in scores:
            assert NOT_SCORED in rows[name], (name, rows[name])
    assert set(scores) <= set(tool().MODULES), set(scores) - set(tool().MODULES)


def test_a_survivors_diff_gives_the_lines_its_mutant_changes() -> None:
    """`--diffs` shows each survivor as the lines it changes against the original function,
    methods included (mutmut keeps both as functions of the mutated module)."""
    mutated = (
        "class Ledger:\n"
        "    def xǁLedgerǁclaim__mutmut_orig(self, n):\n"
        "        return n + 1\n"
        "    def xǁLedgerǁclaim__mutmut_3(self, n):\n"
        "        return n - 1\n"
        "def x_other__mutmut_orig():\n"
        "    return 0\n"
    )
    sources = tool().function_sources(mutated)
    diff = tool().mutant_diff(sources, "simrun_harness.ledger.xǁLedgerǁclaim__mutmut_3")
    assert diff.splitlines() == ["-        return n + 1", "+        return n - 1"]


def test_a_survivors_diff_shows_a_mutated_default_in_the_signature() -> None:
    """A mutant may change a default argument, on the `def` line itself: that line is part
    of the function's source the diff compares."""
    mutated = (
        "def x_plan__mutmut_orig(splittable: bool = True):\n"
        "    return splittable\n"
        "def x_plan__mutmut_1(splittable: bool = False):\n"
        "    return splittable\n"
    )
    diff = tool().mutant_diff(tool().function_sources(mutated), "runs.planner.x_plan__mutmut_1")
    assert diff.splitlines() == [
        "-def x_plan(splittable: bool = True):",
        "+def x_plan(splittable: bool = False):",
    ]


def _meta(outcomes: dict[str, int | None]) -> str:
    """A meta file as mutmut writes one for a mutated file."""
    return json.dumps(
        {
            "exit_code_by_key": outcomes,
            "hash_by_function_name": {"x_f": "0123"},
            "type_check_error_by_key": {},
            "durations_by_key": {},
            "estimated_durations_by_key": {},
        }
    )


def test_a_stopped_run_keeps_its_results_and_the_next_run_takes_them_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped half way keeps mutmut's results of the mutants it checked; a fresh stage
    of the same module gets them before mutmut runs, which then runs only the others."""
    mutation = tool()
    monkeypatch.setattr(mutation, "PARTS", tmp_path / "parts")
    module = mutation.MODULES["reconcile"]
    [path] = module.paths
    stopped = tmp_path / "stopped"
    meta = mutation.meta_of(stopped, path)
    meta.parent.mkdir(parents=True)
    meta.write_text(_meta({"m.x_f__mutmut_1": 1, "m.x_f__mutmut_2": 0, "m.x_f__mutmut_3": None}))

    mutation.keep_parts("reconcile", module, stopped)
    fresh = tmp_path / "fresh"
    seeded = mutation.seed_parts("reconcile", module, fresh)

    assert seeded == 2
    assert mutation.meta_of(fresh, path).read_text() == meta.read_text()


def test_a_run_that_checked_every_mutant_leaves_nothing_to_take_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mutation = tool()
    monkeypatch.setattr(mutation, "PARTS", tmp_path / "parts")
    module = mutation.MODULES["reconcile"]
    [path] = module.paths
    stopped, done = tmp_path / "stopped", tmp_path / "done"
    for where, last in ((stopped, None), (done, 0)):
        meta = mutation.meta_of(where, path)
        meta.parent.mkdir(parents=True)
        meta.write_text(_meta({"m.x_f__mutmut_1": 1, "m.x_f__mutmut_2": last}))
    mutation.keep_parts("reconcile", module, stopped)

    mutation.keep_parts("reconcile", module, done)

    assert mutation.seed_parts("reconcile", module, tmp_path / "fresh") == 0
    assert not (tmp_path / "parts" / "reconcile").exists()

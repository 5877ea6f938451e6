"""A run's and a task's states are spelled once, as the members of `runs/states.py`: no module
of `runs/` compares with a state written as bare text, or lists states as bare text; and they
are imported by one path, `runs.states`, wherever they are used."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from runs.states import RunState, TaskState

ROOT = Path(__file__).resolve().parents[2]
STATES = {str(state) for state in (*RunState, *TaskState)}
# the enums themselves; the port's pod phases (a pod's vocabulary, not a task's or a run's)
OWN_TEXT = {"runs/states.py", "runs/ports.py"}


def _constants(node: ast.AST) -> Iterator[str]:
    for found in ast.walk(node):
        if isinstance(found, ast.Constant) and found.value in STATES:
            yield str(found.value)


def bare_states(source: str) -> list[tuple[int, str]]:
    """(line, state) of each state written as text in a comparison or in a literal that lists
    two states or more (a set, tuple, list, or a dict's keys)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            found += [
                (node.lineno, state)
                for operand in (node.left, *node.comparators)
                for state in _constants(operand)
            ]
        elements = (
            node.elts
            if isinstance(node, ast.Set | ast.Tuple | ast.List)
            else [k for k in node.keys if k is not None]
            if isinstance(node, ast.Dict)
            else []
        )
        listed = [state for element in elements for state in _constants(element)]
        if len(listed) >= 2:
            found.append((node.lineno, ", ".join(listed)))
    return found


def test_the_finder_sees_a_bare_state() -> None:
    assert bare_states('if run.state == "running":\n    pass\n') == [(1, "running")]
    assert bare_states('OVER = frozenset({"done", "skipped"})\n') == [(1, "done, skipped")]
    assert bare_states("OVER = frozenset({TaskState.DONE, TaskState.SKIPPED})\n") == []


def test_no_module_spells_a_state_as_text() -> None:
    wrong = [
        f"{path}:{line}: {state}"
        for file in sorted((ROOT / "runs").rglob("*.py"))
        if "migrations" not in file.parts and (path := str(file.relative_to(ROOT))) not in OWN_TEXT
        for line, state in bare_states(file.read_text())
    ]

    assert not wrong, f"states written as text (use runs.states): {wrong}"


def other_state_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of each import of `RunState` or `TaskState` from a module other than
    `runs.states` (a module that imported them passes them on: a second path to the same)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module != "runs.states":
            names = {alias.name for alias in node.names}
            if names & {"RunState", "TaskState"}:
                found.append((node.lineno, node.module or "."))
    return found


def test_the_finder_sees_a_state_imported_by_another_path() -> None:
    assert other_state_imports("from runs.models import Run, RunState\n") == [(1, "runs.models")]
    assert other_state_imports("from runs.states import RunState, TaskState\n") == []


def test_states_are_imported_from_runs_states_only() -> None:
    """One import path: `from runs.states import RunState, TaskState`, everywhere."""
    wrong = [
        f"{file.relative_to(ROOT)}:{line}: from {module}"
        for place in ("runs", "cluster", "simrun_site", "tests", "bench")
        for file in sorted((ROOT / place).rglob("*.py"))
        for line, module in other_state_imports(file.read_text())
    ]

    assert not wrong, f"states imported from elsewhere than runs.states: {wrong}"

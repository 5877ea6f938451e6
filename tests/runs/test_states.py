"""A run's and a task's states are spelled once, as the members of `runs/states.py`: no module
of `runs/` compares with a state written as bare text, or lists states as bare text."""

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

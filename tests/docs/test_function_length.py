"""No function of the service, the backends or the harness is longer than about 60
lines, so each one can be read at once and a rule stays one plain function."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("runs", "cluster", "harness/src/simrun_harness")
LIMIT = 60


def long_functions(root: Path, *, limit: int = LIMIT) -> list[str]:
    """`path:line name (N lines)` for every function in `root`'s packages over `limit`
    lines (migrations, which Django writes, left out)."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > limit:
                        where = path.relative_to(root)
                        found.append(f"{where}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_is_longer_than_sixty_lines() -> None:
    assert long_functions(ROOT) == []


def test_a_long_function_is_named_with_its_place_and_length(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "big.py").write_text(f"def big() -> None:\n{body}\n")
    assert long_functions(tmp_path) == [f"runs/big.py:1 big ({LIMIT + 1} lines)"]

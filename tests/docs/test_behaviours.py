"""docs/behaviours.md stays true: every id a test names has its row, every test file of a row
names the row's id, and every module of a row exists."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "behaviours.md"
TESTS = ROOT / "tests"
NAMED_ID = re.compile(r"\b([CBMKS][0-9]+):")
ROW = re.compile(r"^\| ([CBMKS][0-9]+) \| [^|]+ \| ([^|]+) \| ([^|]+) \|$")
PATH = re.compile(r"`([\w/.-]+\.py)`")


def table() -> dict[str, tuple[list[str], list[str]]]:
    """id → (module paths, test files relative to tests/) as the doc's table gives them."""
    rows = {}
    for line in DOC.read_text().splitlines():
        found = ROW.match(line)
        if found:
            rows[found[1]] = (PATH.findall(found[2]), PATH.findall(found[3]))
    return rows


def ids_named_by_tests() -> dict[str, set[str]]:
    """id → the test files (relative to tests/) that name it, as `grep -rlE '\\bC7:'` finds."""
    named: dict[str, set[str]] = defaultdict(set)
    for file in TESTS.rglob("*.py"):
        for found in set(NAMED_ID.findall(file.read_text())):
            named[found].add(str(file.relative_to(TESTS)))
    return named


def test_every_behaviour_a_test_names_is_in_the_table() -> None:
    rows = table()

    missing = sorted(set(ids_named_by_tests()) - set(rows))

    assert not missing, f"{DOC.name} has no row for the ids the tests name: {missing}"


def test_every_test_file_of_the_table_names_its_behaviour() -> None:
    named = ids_named_by_tests()

    wrong = [
        f"{found}: {file}"
        for found, (_, files) in table().items()
        for file in files
        if file not in named.get(found, set())
    ]

    assert not wrong, f"test files in {DOC.name} that do not name the id of their row: {wrong}"


def test_every_behaviour_with_tests_lists_at_least_one() -> None:
    named = ids_named_by_tests()

    empty = sorted(found for found, (_, files) in table().items() if named.get(found) and not files)

    assert not empty, f"rows of {DOC.name} listing no test though tests name them: {empty}"


def test_every_module_of_the_table_exists() -> None:
    gone = sorted(
        f"{found}: {module}"
        for found, (modules, _) in table().items()
        for module in modules
        if not (ROOT / module).is_file()
    )

    assert table(), f"no table of behaviours found in {DOC.name}"
    assert not gone, f"modules in {DOC.name} that do not exist: {gone}"

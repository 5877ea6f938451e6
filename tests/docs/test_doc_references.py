"""The docs point at what is there, and only at what the repository holds.

- A `path:line` reference names a file of the repository and a line it has.
- A `path` followed by (`name`, …) names things defined in that file: a function, a class, a
  method (`Class.method`) or a module-level name of a Python file; a text of any other file.
- No doc or source file points outside the repository (a machine's path, a sibling folder) or
  at an issue number, a design note or a list of behaviours kept elsewhere."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
TOPS = ("runs", "cluster", "harness", "simrun_site", "tests", "bench", "tools", "deploy", "docs")
PATH = r"((?:" + "|".join(TOPS) + r")/[\w./-]+\.\w+)"
LINE_REF = re.compile(PATH + r":(\d+)\b")
NAMED_REF = re.compile(f"`{PATH}` " + r"\((`[^()]*)\)")
NAME = re.compile(r"`([\w.=-]+)`")
SOURCES = ("runs", "cluster", "harness/src", "simrun_site", "tests", "bench", "tools", "deploy")
OUTSIDE = re.compile(
    r"/work/|\.\./shared|\bDESIGN(?:\.md| §)|\bFIDELITY\.md|(?<![\w/#])[Ii]ssues? #?\d+"
)
THIS_FILE = Path(__file__).resolve()


def doc_lines() -> Iterator[tuple[Path, int, str]]:
    for doc in DOCS:
        for number, line in enumerate(doc.read_text().splitlines(), start=1):
            yield doc, number, line


def defined_names(source: Path) -> set[str]:
    """The names a Python file defines or imports at its top, and its classes' attributes, as
    `Class.name` and alone (a method of the file's class named by the file)."""
    names: set[str] = set()
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ImportFrom | ast.Import):
            names |= {alias.asname or alias.name for alias in node.names}
        if isinstance(node, ast.ClassDef):
            for inner in node.body:
                member = None
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    member = inner.name
                elif isinstance(inner, ast.AnnAssign) and isinstance(inner.target, ast.Name):
                    member = inner.target.id
                if member is not None:
                    names |= {member, f"{node.name}.{member}"}
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_every_line_a_doc_points_at_exists() -> None:
    wrong = []
    for doc, number, line in doc_lines():
        for path, at in LINE_REF.findall(line):
            file = ROOT / path
            count = len(file.read_text().splitlines()) if file.is_file() else 0
            if not 1 <= int(at) <= count:
                wrong.append(f"{doc.name}:{number}: {path}:{at} ({count} lines)")

    assert not wrong, "references to lines that are not there:\n" + "\n".join(wrong)


def test_every_name_a_doc_gives_with_its_file_is_in_that_file() -> None:
    wrong = []
    for doc, number, line in doc_lines():
        for path, names in NAMED_REF.findall(line):
            file = ROOT / path
            if not file.is_file():
                wrong.append(f"{doc.name}:{number}: no file {path}")
                continue
            if file.suffix == ".py":
                missing = [n for n in NAME.findall(names) if n not in defined_names(file)]
            else:
                missing = [n for n in NAME.findall(names) if n not in file.read_text()]
            wrong += [f"{doc.name}:{number}: {path} has no {name}" for name in missing]

    assert not wrong, "names a doc gives that their file lacks:\n" + "\n".join(wrong)


def test_nothing_points_outside_the_repository() -> None:
    files = [*DOCS, *(f for top in SOURCES for f in (ROOT / top).rglob("*") if f.is_file())]
    wrong = [
        f"{file.relative_to(ROOT)}:{number}: {found[0]!r}"
        for file in files
        if file.suffix in (".py", ".md", ".sh", ".yaml", ".toml", ".html", ".txt")
        and file.resolve() != THIS_FILE
        for number, line in enumerate(file.read_text(errors="replace").splitlines(), start=1)
        if (found := OUTSIDE.search(line))
    ]

    assert not wrong, "references outside the repository:\n" + "\n".join(wrong)

"""The shell blocks of the walk-throughs run as written, so they cannot rot.

Convention (docs/architecture.md, "Docs that run"): every fenced shell block of the files in
WALKTHROUGHS says in its info string whether it runs: ```` ```sh runnable ```` blocks run here,
each in a fresh copy of the repository (its tracked files, the `.venv` linked in) with the
environment of a fresh machine: no SIMRUN_, DATABASE_, CELERY_ or DJANGO_ variables, so the
embedded default under the copy's `./.simrun`. A block passes when bash (`-euo pipefail`)
exits 0. ```` ```sh not-runnable ```` blocks are too heavy for a test; the README's two
commands are such, and they must be exactly what `.ci/run` runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WALKTHROUGHS = ["README.md", "docs/plugins.md"]
SHELLS = {"sh", "bash", "shell", "console"}
FENCE = re.compile(r"^```(\S*)(.*)$")
README_COMMAND = re.compile(r"^bash deploy/local/dev\.sh\b.*$")


@dataclass(frozen=True)
class Block:
    """A fenced block of a doc."""

    doc: str
    line: int
    language: str
    marks: frozenset[str]
    text: str

    @property
    def name(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks(doc: str) -> list[Block]:
    """The fenced blocks of `doc` (a path relative to the repository)."""
    found, lines = [], (ROOT / doc).read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        body = "\n".join(lines[index + 1 : end]) + "\n"
        marks = frozenset(opening[2].split())
        found.append(Block(doc, index + 1, opening[1], marks, body))
        index = end + 1
    return found


def shell_blocks() -> list[Block]:
    return [b for doc in WALKTHROUGHS for b in blocks(doc) if b.language in SHELLS]


def runnable() -> list[Block]:
    return [b for b in shell_blocks() if "runnable" in b.marks]


def commands(block: Block) -> list[str]:
    """The block's command lines (comments and blank lines left out)."""
    lines = [line.strip() for line in block.text.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def fresh_copy(target: Path) -> Path:
    """The repository's tracked files copied into `target`, its `.venv` linked."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    (target / ".venv").symlink_to(ROOT / ".venv")
    return target


def fresh_env(home: Path) -> dict[str, str]:
    """This environment as a fresh machine has it: none of simrun's variables."""
    prefixes = ("SIMRUN_", "DATABASE_", "CELERY_", "DJANGO_", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["HOME"] = str(home)
    return env


def test_every_shell_block_says_whether_it_runs() -> None:
    """A walk-through block without a mark would escape the check below unnoticed."""
    unmarked = [b.name for b in shell_blocks() if not b.marks & {"runnable", "not-runnable"}]

    assert not unmarked, f"shell blocks marked neither runnable nor not-runnable: {unmarked}"


def test_the_readme_commands_are_the_ones_ci_runs() -> None:
    """The README's two commands, in order and as written, are the `deploy/local/dev.sh`
    commands of `.ci/run`: what CI proves is what a newcomer types."""
    readme = [b for b in blocks("README.md") if b.language in SHELLS and "not-runnable" in b.marks]
    typed = [line for block in readme for line in commands(block)]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()

    run_by_ci = [line.strip() for line in ci if README_COMMAND.match(line.strip())]

    assert typed == ["bash deploy/local/dev.sh demo", "bash deploy/local/dev.sh test"]
    assert run_by_ci == typed


def test_ci_runs_the_tests_with_the_package_index_unreachable() -> None:
    """After the main job set up `.venv`, the README's test command needs no package index:
    `.ci/run` blocks it (uv and pip) before that command."""
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    test_line = ci.index("bash deploy/local/dev.sh test")
    exported = " ".join(line for line in ci[:test_line] if line.startswith("export "))

    assert "UV_OFFLINE=1" in exported.split()
    assert "PIP_NO_INDEX=1" in exported.split()


@pytest.mark.parametrize("block", runnable(), ids=lambda b: b.name)
def test_a_runnable_block_runs(block: Block, tmp_path: Path) -> None:
    copy = fresh_copy(tmp_path / "simrun")
    home = tmp_path / "home"
    home.mkdir()

    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.text],
        cwd=copy,
        env=fresh_env(home),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert result.returncode == 0, (
        f"{block.name} exited {result.returncode}:\n{block.text}\n"
        f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )


def test_there_are_runnable_blocks() -> None:
    """The walk-throughs each have a block that runs (a parse that found none would pass)."""
    docs = {b.doc for b in runnable()}

    assert docs == set(WALKTHROUGHS)

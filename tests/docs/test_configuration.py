"""docs/configuration.md lists every environment variable the code reads, each with its default,
type and effect, and no variable that nothing reads."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.settings_read import ROOT, Read, every_read

DOC = ROOT / "docs" / "configuration.md"
HEADER = ["variable", "default", "type", "effect"]
NAME_IN_CELL = re.compile(r"`([A-Z][A-Z0-9_]*[A-Z0-9])`")


def documented(doc: Path) -> dict[str, list[str]]:
    """The variables of the doc's tables: name → the row's cells."""
    rows: dict[str, list[str]] = {}
    for line in doc.read_text().splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0] == "variable":
            assert cells == HEADER, f"a table of {doc.name} has the columns {cells}, not {HEADER}"
            continue
        for name in NAME_IN_CELL.findall(cells[0]):
            rows[name] = cells
    return rows


def _missing_message(missing: list[Read]) -> str:
    names: dict[str, list[str]] = {}
    for read in missing:
        names.setdefault(read.name, []).append(read.where)
    lines = [f"  {name}  (read at {', '.join(places)})" for name, places in sorted(names.items())]
    return (
        f"{len(names)} variable(s) the code reads are not in {DOC.relative_to(ROOT)}; "
        "add a row (variable | default | type | effect) for each:\n" + "\n".join(lines)
    )


def test_every_variable_the_code_reads_is_documented() -> None:
    """The message names each missing variable and where the code reads it."""
    rows = documented(DOC)

    missing = [read for read in every_read() if read.name not in rows]

    assert not missing, _missing_message(missing)


def test_every_documented_variable_has_a_default_a_type_and_an_effect() -> None:
    rows = documented(DOC)

    incomplete = sorted(name for name, cells in rows.items() if len(cells) != 4 or not all(cells))

    assert not incomplete, f"rows of {DOC.name} without a default, type or effect: {incomplete}"


def test_every_documented_variable_is_read_by_the_code() -> None:
    """A variable the code no longer reads is a false claim of the doc."""
    read = {r.name for r in every_read()}

    stale = sorted(set(documented(DOC)) - read)

    assert not stale, f"{DOC.name} lists variables nothing reads: {stale}"


def test_the_scan_finds_each_kind_of_read(tmp_path: Path) -> None:
    """The scan sees the readers of simrun_site/env.py, os.environ in its forms, the harness's
    readers and the deploy scripts' defaults: one of each, known to be in the code."""
    found = {(r.name, r.where.split(":")[0]) for r in every_read()}

    assert ("SIMRUN_DATA_DIR", "simrun_site/settings.py") in found  # env.path
    assert ("SIMRUN_PORT", "runs/cli/service_commands.py") in found  # os.environ.get
    assert ("SIMRUN_TOKEN", "runs/cli/client.py") in found  # env.get on a mapping
    assert ("SIMRUN_NODE", "harness/src/simrun_harness/config.py") in found  # _raw(env, …)
    assert ("SIMRUN_DB_POOL", "simrun_site/asgi.py") in found  # os.environ.setdefault
    assert ("SIMRUN_BOOTSTRAP_PYTHON", "deploy/local/dev.sh") in found  # ${X:-}

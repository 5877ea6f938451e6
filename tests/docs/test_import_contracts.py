"""The import contracts of pyproject.toml (`[tool.importlinter]`, docs/architecture.md's
layers) hold, and they bite: one import against the direction, even inside a function,
breaks the contract that forbids it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PACKAGES = ("runs", "cluster", "simrun_site", "harness/src/simrun_harness")


def lint_imports(where: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """`lint-imports` over the packages found first from `where` (all contracts, or these)."""
    chosen = [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache", *chosen],
        cwd=where,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{where}:{where / 'harness' / 'src'}"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_import_contract_holds() -> None:
    result = lint_imports(ROOT)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("harness/src/simrun_harness/ledger.py", "import django", "harness"),
        ("runs/controller/rules.py", "from runs.models import Run", "core"),
        ("runs/planner.py", "from cluster.local import machine", "core"),
        ("runs/selectors/logs.py", "from cluster.local.backend import LocalBackend", "port"),
        ("cluster/argo/status.py", "from runs.store import store", "adapters"),
        ("runs/pages/run_page.py", "from runs.controller import reconcile", "surfaces"),
        ("runs/selectors/tasks.py", "from runs.services import runs", "layers"),
        # the hidden cycle that was: services.submission → tasks → controller.tick → services
        ("runs/services/submission.py", "def later():\n    from runs import tasks", "acyclic"),
    ],
)
def test_an_import_against_the_direction_breaks_its_contract(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)  # a copy holds as the tree does (above)
    with (tmp_path / module).open("a") as handle:
        handle.write(f"\n{line}\n")

    result = lint_imports(tmp_path, contract)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "BROKEN" in result.stdout

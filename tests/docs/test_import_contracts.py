"""The import contracts of pyproject.toml (`[tool.importlinter]`, docs/architecture.md's
layers) hold, and they bite: one import against the direction, even inside a function,
breaks the contract that forbids it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
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


def layered() -> set[str]:
    """The modules the layers contract of pyproject.toml puts in a layer."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [layers] = [c["layers"] for c in config["contracts"] if c["id"] == "layers"]
    return {name.strip() for layer in layers for name in re.split(r"[|:]", layer)}


def test_every_module_of_runs_is_in_a_layer() -> None:
    """A module added to `runs/` takes a place in the direction of imports, so the contracts
    say what it may import and who may import it."""
    modules = {
        f"runs.{path.stem if path.is_file() else path.name}"
        for path in (ROOT / "runs").iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }

    assert modules - layered() == set(), "modules of runs/ in no layer of pyproject.toml"


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("harness/src/simrun_harness/ledger.py", "import django", "harness"),
        ("runs/controller/rules.py", "from runs.models import Run", "core"),
        ("runs/planner.py", "from cluster.local import machine", "core"),
        ("runs/selectors/logs.py", "from cluster.local.backend import LocalBackend", "port"),
        ("cluster/argo/status.py", "from runs.store import store", "adapters"),
        ("runs/pages/run_page.py", "from runs.controller import reconcile", "surfaces"),
        ("runs/pages/submit.py", "from runs.backends import backend", "surfaces"),
        ("runs/api/snapshots.py", "from runs.models import Snapshot", "surfaces"),
        ("runs/pages/live.py", "from runs.models import Run", "surfaces"),
        ("runs/edge/readers.py", "from runs.controller import records", "surfaces"),
        # a surface of the web reaching the controller through a module it may import
        ("runs/selectors/servers.py", "def later():\n    from runs.controller import tick", "web"),
        ("runs/selectors/tasks.py", "from runs.services import runs", "layers"),
        ("runs/plugin_scaffold.py", "from runs.services import runs", "layers"),
        ("runs/token_checks.py", "from runs.selectors import tasks", "layers"),
        ("runs/reuse.py", "from runs.models import Run", "layers"),
        ("runs/crates/record.py", "from runs.backends import backend", "layers"),
        ("runs/local_packages.py", "import django", "core"),
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

"""docs/architecture.md stays true: the adapters and the harness import only what its layers
allow, and its diagram of the layers is the import contracts'."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
# what the backends may import of the domain: its port, plain values and pure functions
DOMAIN_VALUES = {
    "runs.ports",
    "runs.plans",
    "runs.resources",
    "runs.environments",
    "runs.local_packages",
    "runs.priorities",
}
FRAMEWORKS = ("django", "rest_framework", "celery", "simrun_site")


def imports(place: Path) -> list[tuple[str, str]]:
    """(file, module) of every import below `place`, lazy ones inside functions included."""
    found = []
    for file in place.rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Import):
                found += [(str(file.relative_to(ROOT)), alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.append((str(file.relative_to(ROOT)), node.module))
    return found


def _in(module: str, packages: tuple[str, ...] | set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_the_backends_import_only_the_port_and_plain_domain_values() -> None:
    """cluster/ knows no Django, no Celery, no settings, and of `runs` only plain values."""
    wrong = [
        f"{file}: {module}"
        for file, module in imports(ROOT / "cluster")
        if _in(module, FRAMEWORKS) or (_in(module, ("runs",)) and not _in(module, DOMAIN_VALUES))
    ]

    assert not wrong, f"cluster/ imports beyond its layer: {wrong}"


def test_the_harness_imports_nothing_of_the_service() -> None:
    """What runs in a pod has no Django and none of simrun's service code."""
    wrong = [
        f"{file}: {module}"
        for file, module in imports(ROOT / "harness" / "src")
        if _in(module, (*FRAMEWORKS, "runs", "cluster"))
    ]

    assert not wrong, f"the harness imports the service: {wrong}"


def test_the_domain_reaches_the_backends_only_through_the_port() -> None:
    """`runs/` holds the port (`runs/ports.py`) and imports nothing of `cluster/` but the
    adapters where the backend of the settings is made (`runs/backends.py`)."""
    allowed = {"runs/backends.py": ("cluster.local.backend", "cluster.argo")}
    wrong = [
        f"{file}: {module}"
        for file, module in imports(ROOT / "runs")
        if _in(module, ("cluster",)) and not _in(module, allowed.get(file, ()))
    ]

    assert not wrong, f"runs/ imports a backend beyond the port: {wrong}"


DIAGRAM_LINE = re.compile(r"^  (\w+)?\s+(.*)$")
RUNS_MODULE = re.compile(r"\bruns/([a-z_]+)(?:\.py)?\b(?!/)")


def diagram_layers() -> list[set[str]]:
    """The modules of `runs/` on each layer of the doc's diagram, top to bottom: a line that
    starts with a label opens a layer, the lines below it without one continue it."""
    text = DOC.read_text()
    block = text[text.index("## Layers and their direction") :].split("```")[1]
    layers: list[set[str]] = []
    for line in block.splitlines():
        found = DIAGRAM_LINE.match(line)
        if not found:
            continue
        modules = {f"runs.{name}" for name in RUNS_MODULE.findall(found[2])}
        if found[1]:
            layers.append(modules)
        elif layers:
            layers[-1] |= modules
    return [layer for layer in layers if layer]


def contract_layers() -> list[set[str]]:
    """The layers of the `layers` contract of pyproject.toml, top to bottom."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [layers] = [c["layers"] for c in config["contracts"] if c["id"] == "layers"]
    return [{name.strip() for name in re.split(r"[|:]", layer)} for layer in layers]


def test_the_diagrams_layers_are_the_import_contracts() -> None:
    """The picture of the layers is the one `lint-imports` holds the code to."""
    assert diagram_layers() == contract_layers()

"""Which environment variables the code reads, found by reading the code.

Python: the syntax tree of every module of `runs/`, `cluster/`, `harness/`, `simrun_site/`
and `manage.py`, looking for a name given as a string literal to
- a reader of `simrun_site/env.py` (`env.string("X", …)`, `env.integer(…)`, …),
- `os.environ.get("X")`, `os.environ["X"]`, `os.environ.setdefault("X", …)`, `os.getenv("X")`,
- `env.get("X")` on a mapping of the environment (the CLI's and the harness's `env`),
- any call that passes the environment (`env`) together with the name, as the harness's
  readers do (`_raw(env, "SIMRUN_NODE")`).
Shell: `${X:-…}` / `${X-…}` (a variable read with a default) in the deploy scripts.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON_PLACES = ["runs", "cluster", "harness", "simrun_site", "manage.py"]
SHELL_SCRIPTS = ["deploy/local/dev.sh", "deploy/service/controller.sh", "deploy/vendor.sh"]
NAME = re.compile(r"[A-Z][A-Z0-9_]*[A-Z0-9]")
ENVIRONMENT_NAMES = {"env", "environ", "environment"}
ENV_READERS = {"raw", "string", "boolean", "integer", "number", "choice", "choices", "strings"}
ENV_READERS |= {"path", "paths"}
ENV_READERS |= {"database", "get", "setdefault", "getenv"}
# the system's own variables, passed on to the processes simrun starts: no settings of simrun
SYSTEM = {"PATH", "PYTHONPATH", "HOME"}
SHELL_READ = re.compile(r"\$\{([A-Z][A-Z0-9_]*):?[-=]")


@dataclass(frozen=True)
class Read:
    """One place the code reads a variable."""

    name: str
    where: str  # path:line

    def __str__(self) -> str:
        return f"{self.name} ({self.where})"


def _is_environment(node: ast.expr) -> bool:
    """`env`, `environ`, `os.environ`."""
    if isinstance(node, ast.Name):
        return node.id in ENVIRONMENT_NAMES
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _literal(node: ast.expr) -> str | None:
    """The string of a literal that looks like a variable's name."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return None
    return node.value if NAME.fullmatch(node.value) else None


def _names_in(node: ast.AST) -> list[str]:
    """Variable names this node reads, if it is a read of the environment."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and _is_environment(node.value)
    ):
        found = _literal(node.slice)
        return [found] if found else []
    if not isinstance(node, ast.Call) or not node.args:
        return []
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in ENV_READERS:
        receiver = func.value
        if _is_environment(receiver) or (isinstance(receiver, ast.Name) and receiver.id == "os"):
            found = _literal(node.args[0])
            return [found] if found else []
    if any(_is_environment(arg) for arg in node.args):
        return [name for arg in node.args if (name := _literal(arg))]
    return []


def _python_files() -> list[Path]:
    files: list[Path] = []
    for place in PYTHON_PLACES:
        path = ROOT / place
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return [f for f in files if "migrations" not in f.parts]


def python_reads() -> list[Read]:
    reads = []
    for file in _python_files():
        tree = ast.parse(file.read_text(), filename=str(file))
        for node in ast.walk(tree):
            for name in set(_names_in(node)) - SYSTEM:
                where = f"{file.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
                reads.append(Read(name, where))
    return reads


def shell_reads() -> list[Read]:
    reads = []
    for script in SHELL_SCRIPTS:
        for number, line in enumerate((ROOT / script).read_text().splitlines(), start=1):
            reads += [Read(name, f"{script}:{number}") for name in SHELL_READ.findall(line)]
    return reads


def every_read() -> list[Read]:
    """Every read of a variable in the code and the deploy scripts, in file order."""
    return python_reads() + shell_reads()

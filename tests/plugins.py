"""Plugin packages made on the spot: a real distribution (a `.dist-info` with entry points
beside its modules) in a directory put on `sys.path`, found by `importlib.metadata` as any
installed plugin is."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from runs.task_types import forget_plugins


def write_plugin(
    root: Path,
    *,
    package: str,
    version: str = "0.1",
    modules: Mapping[str, str],
    types: Mapping[str, str],
) -> Path:
    """Write the modules and the metadata of a plugin under `root` (a sys.path entry)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in modules.items():
        (root / f"{name}.py").write_text(text)
    info = root / f"{package.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
    lines = "".join(f"{name} = {value}\n" for name, value in types.items())
    (info / "entry_points.txt").write_text(f"[simrun.task_types]\n{lines}")
    return root


@contextmanager
def on_path(root: Path) -> Iterator[None]:
    """The plugins under `root` installed for this process, and forgotten afterwards."""
    sys.path.insert(0, str(root))
    forget_plugins()
    try:
        yield
    finally:
        sys.path.remove(str(root))
        forget_plugins()


BROKEN = "raise ImportError('needs libfoo, which is not installed')\n"

PICKY = '''
from pydantic import BaseModel, ConfigDict, field_validator
from simrun_harness.plugin import SettingsError, SplitTaskType


class PickySettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    parameter: str = "k1"
    mode: str = "ok"

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        if value == "bug":
            raise TypeError("the validator has a bug")
        return value


class Picky(SplitTaskType):
    """Lists its units only for a parameter the model has."""

    name = "picky"
    settings_model = PickySettings

    def units(self, ctx):
        if ctx.settings.parameter != "k1":
            raise SettingsError(f"the model has no parameter {ctx.settings.parameter!r}")
        return [1, 2]
'''


def errors_plugin(root: Path) -> Path:
    """Two plugins: `picky` (whose units() and validator raise) and `broken` (fails import)."""
    write_plugin(
        root,
        package="picky-plugin",
        modules={"picky_types": PICKY},
        types={"picky": "picky_types:Picky"},
    )
    return write_plugin(
        root,
        package="broken-plugin",
        modules={"broken_types": BROKEN},
        types={"broken": "broken_types:Broken"},
    )

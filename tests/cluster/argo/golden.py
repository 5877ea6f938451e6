"""Golden files: generated once, committed, compared exactly; SIMRUN_UPDATE_GOLDEN=1 rewrites.

A golden file is the YAML of a plain value (keys sorted), so a change of a manifest shows in
the diff of the file a reviewer reads.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import yaml

GOLDEN = Path(__file__).resolve().parent / "golden"


def updating() -> bool:
    """Whether this run rewrites golden files instead of comparing with them."""
    return os.environ.get("SIMRUN_UPDATE_GOLDEN") == "1"


PYTHON = "<python>"
"""Stands for this machine's interpreter (the simulator runs command pods with it), so a golden
file does not depend on where the checkout is."""


def _portable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _portable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_portable(v) for v in value]
    if isinstance(value, str):
        return value.replace(sys.executable, PYTHON)
    return value


def render(value: Any) -> str:
    return yaml.safe_dump(_portable(value), sort_keys=True, width=100, allow_unicode=True)


def assert_golden(name: str, value: Any) -> None:
    """`value` equals the golden file `name` (rewritten first with SIMRUN_UPDATE_GOLDEN=1)."""
    path = GOLDEN / name
    text = render(value)
    if updating():
        path.write_text(text)
    assert path.exists(), f"no golden file {path.name}: run with SIMRUN_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path.name} differs (SIMRUN_UPDATE_GOLDEN=1 rewrites it)"
    assert yaml.safe_load(path.read_text()) == _portable(value)

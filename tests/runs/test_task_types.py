"""The registry of task types: the built-in `command` and the plugins' entry points."""

from __future__ import annotations

import subprocess
import sys

from runs.task_types import COMMAND, CommandType, describe, registry
from simrun_harness.plugin import SplitTaskType, UnsplitTaskType


def test_the_registry_finds_the_example_plugin_through_its_entry_points() -> None:
    types = registry()
    assert types[COMMAND] is CommandType
    assert issubclass(types["sbml_scan"], SplitTaskType)
    assert issubclass(types["ode_scan"], SplitTaskType)
    assert issubclass(types["summary"], UnsplitTaskType)
    assert {"sleep", "allocate", "fail"} <= set(types)


def test_every_type_exposes_its_settings_schema_and_resource_hint() -> None:
    """S11: task types with the JSON Schema of their settings."""
    view = describe("ode_scan", registry()["ode_scan"])
    assert view["splittable"] is True
    assert "parameters" in view["settings_schema"]["properties"]
    assert view["hint"]["memory_per_worker_gb"] > 0


def test_the_harness_imports_without_django() -> None:
    """The harness runs in model environments that have no Django."""
    code = (
        "import sys; sys.modules['django'] = None\n"
        "import simrun_harness.worker, simrun_harness.merge, simrun_harness.exec\n"
        "import simrun_harness.ledger, simrun_harness.report, simrun_harness.layout\n"
        "assert 'django' not in {m.split('.')[0] for m in sys.modules if sys.modules[m]}\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr

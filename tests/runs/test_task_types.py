"""The registry of task types: the built-in `command` and the plugins' entry points."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runs.task_types import COMMAND, registry
from tests.plugins import on_path, write_plugin


def test_the_registry_finds_the_example_plugin_through_its_entry_points() -> None:
    types = registry()
    assert types[COMMAND].origin() == "built-in"
    assert types["sbml_scan"].splittable
    assert types["ode_scan"].splittable
    assert not types["summary"].splittable
    assert types["summary"].ports == ("scan",)
    assert {"sleep", "allocate", "fail"} <= set(types)


def test_every_type_exposes_its_settings_schema_and_resource_hint() -> None:
    """S11: task types with the JSON Schema of their settings."""
    view = registry()["ode_scan"].describe()
    assert view["splittable"] is True
    assert "parameters" in view["settings_schema"]["properties"]
    assert view["hint"]["memory_per_worker_gb"] > 0


def test_the_harness_imports_without_django() -> None:
    """The harness runs in model environments that have no Django."""
    code = (
        "import sys; sys.modules['django'] = None\n"
        "import simrun_harness.worker, simrun_harness.merge, simrun_harness.exec\n"
        "import simrun_harness.ledger, simrun_harness.ledger_creation\n"
        "import simrun_harness.ledger_reads, simrun_harness.report, simrun_harness.layout\n"
        "assert 'django' not in {m.split('.')[0] for m in sys.modules if sys.modules[m]}\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_plugin_installed_while_the_process_runs_is_known_at_its_next_lookup(
    tmp_path: Path,
) -> None:
    """A running service and its workers see `simrun plugin install` at once: what was read
    of the installed plugins is read again once an import path directory changed."""
    site = tmp_path / "site"
    site.mkdir()
    with on_path(site):
        assert "wave" not in registry()
        write_plugin(
            site,
            package="wave-plugin",
            modules={"wave_types": "WAVE = 1\n"},
            types={"wave": "runs.task_types:CommandType"},
        )
        assert registry().plugins()["wave"][0].package == "wave-plugin"
        assert registry()["wave"].description == "An image and its args, run once."

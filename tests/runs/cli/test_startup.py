"""The command line answers at once: `simrun validate` sets up no Django and imports no
plugin module (a plugin host in the types' environment answers for them, or its answer kept
by the plugin's digest); `simrun plugin list` imports none either.

(How fast is measured by bench/cli/startup.py, not here.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROBE = """
import json, sys
from runs.cli.main import main
code = main(sys.argv[1:])
loaded = sorted(m.split(".")[0] for m in sys.modules)
print(json.dumps({"code": code, "modules": sorted(sys.modules), "tops": loaded}))
"""


def modules_after(*args: str) -> tuple[int, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    return result["code"], set(result["modules"])


def test_validate_imports_no_django_and_no_plugin_module(tmp_path: Path) -> None:
    workflow = tmp_path / "naps.yaml"
    workflow.write_text(
        "name: naps\ntasks:\n  - id: nap\n    type: sleep\n    settings: {units: 2}\n"
    )
    code, modules = modules_after("validate", str(workflow))
    assert code == 0
    assert not {m for m in modules if m.split(".")[0] in {"django", "simrun_examples", "celery"}}


def test_plugin_list_imports_no_plugin_and_no_django() -> None:
    code, modules = modules_after("plugin", "list")
    assert code == 0
    assert not {m for m in modules if m.split(".")[0] in {"django", "simrun_examples", "celery"}}

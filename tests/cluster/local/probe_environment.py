"""A real environment for the standby tests, made in a second: a virtual environment that
sees the service's packages (pydantic, the harness) and has a plugin of its own, `probe`,
installed from a directory as `simrun plugin install` (editable) installs one.

A unit of `probe` writes what its process sees (its environment and that of a process it
starts, directory, name, the plugin's WORD, the data file it read at import, the HELPER of a
module it imports and the plugin's own submodules), so a test can compare a standby's pod
with a fresh one; its settings make it sleep, fail, or hold memory in the pod's main process.
Its import sets `PROBE_IMPORTED` in its environment, and waits at the `gate` while a test
holds it there (`held_at_the_gate`).
"""

from __future__ import annotations

import json
import py_compile
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import uv

PLUGIN = """
import json, os, pkgutil, subprocess, sys, time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from simrun_harness.plugin import SplitTaskType
from probe_helper import HELPER

WORD = {word!r}
DATA = (Path(__file__).parent / "data.txt").read_text()
MODULES = sorted(m.name for m in pkgutil.iter_modules(__path__))
os.environ["PROBE_IMPORTED"] = WORD
{extra}
GATE = Path({gate!r})
if GATE.exists():  # a test holds the import here until it writes to the gate (a FIFO)
    gate = os.open(GATE, os.O_RDWR)
    Path(str(GATE) + ".held").write_text(str(os.getpid()))
    os.read(gate, 1)
    os.close(gate)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    units: int = 2
    seconds: float = 0.0
    fail: bool = False
    hold_mb: int = 0


def seen():
    return {{
        "word": WORD,
        "data": DATA,
        "helper": HELPER,
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "argv0": sys.argv[0],
        "comm": Path("/proc/self/comm").read_text().strip(),
        "path0": sys.path[0],
        "modules": MODULES,
        "child_env": child_env(),
    }}


def child_env():
    \"\"\"The environment a process the unit starts gets (`env`, not Python: as it is).\"\"\"
    out = subprocess.run(["env", "-0"], capture_output=True, check=True).stdout
    return dict(v.split("=", 1) for v in out.decode().split("\\0") if v)


class Probe(SplitTaskType):
    name = "probe"
    settings_model = Settings

    def units(self, ctx):
        if ctx.settings.hold_mb:  # in the pod's main process: the supervisor's to watch
            block = bytearray(b"\\x01") * (ctx.settings.hold_mb * 2**20)
            time.sleep(120)
            del block
        return list(range(ctx.settings.units))

    def run_unit(self, ctx, unit, out):
        time.sleep(ctx.settings.seconds)
        if ctx.settings.fail:
            raise RuntimeError("the probe fails on purpose")
        (out / "seen.json").write_text(json.dumps(seen()))

    def merge(self, ctx, units, out):
        found = [json.loads((u / "seen.json").read_text()) for u in units]
        (out / "seen.json").write_text(json.dumps(found))
"""


@dataclass(frozen=True)
class Probe:
    """The environment `name` in `environments`, and the probe plugin's project."""

    name: str
    root: Path
    project: Path

    @property
    def gate(self) -> Path:
        """Where a test holds the plugin's import (outside the project and the import path)."""
        return self.project.parent / f"{self.project.name}.gate"

    @property
    def module(self) -> Path:
        return self.project / "src" / "probe_plugin" / "__init__.py"

    @property
    def data(self) -> Path:
        return self.project / "src" / "probe_plugin" / "data.txt"

    @property
    def site_packages(self) -> Path:
        [found] = (self.root / "lib").glob("python*/site-packages")
        return found

    @property
    def helper(self) -> Path:
        """A module the plugin imports, installed as a file of the environment (not from a
        directory of its own)."""
        return self.site_packages / "probe_helper.py"

    def write(self, word: str, data: str = "data", extra: str = "") -> None:
        """The plugin's code (its WORD, `extra` code run at import) and the data file it
        reads at import."""
        self.module.parent.mkdir(parents=True, exist_ok=True)
        self.module.write_text(PLUGIN.format(word=word, extra=extra, gate=str(self.gate)))
        self.data.write_text(data)


def probe_environment(environments: Path, project: Path, name: str = "probe") -> Probe:
    """Make the environment: uv's venv, the service's site-packages added as a site dir (so
    its editable harness resolves), the harness's console scripts, the plugin's metadata."""
    root = environments / name
    subprocess.run(
        [uv.find_uv_bin(), "venv", "-q", "--python", sys.executable, str(root)], check=True
    )
    probe = Probe(name, root, project)
    probe.write("first")
    probe.helper.write_text('HELPER = "helper"\n')
    # compiled, as an environment is built (uv's --compile-bytecode): no import adds a
    # __pycache__ to site-packages later, which a standby would take for an installation
    py_compile.compile(str(probe.helper), doraise=True)
    service_site = sysconfig.get_paths()["purelib"]
    (probe.site_packages / "service.pth").write_text(
        f"import site; site.addsitedir({service_site!r})\n"
    )
    for script, module in [
        ("simrun-worker", "worker"),
        ("simrun-exec", "exec"),
        ("simrun-merge", "merge"),
    ]:
        path = root / "bin" / script
        path.write_text(
            f"#!{root / 'bin' / 'python'}\nimport sys\n"
            f"from simrun_harness.{module} import main\nsys.exit(main())\n"
        )
        path.chmod(0o755)
    info = probe.site_packages / "probe_plugin-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-plugin\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[simrun.task_types]\nprobe = probe_plugin:Probe\n")
    direct = {"url": project.as_uri(), "dir_info": {"editable": True}}
    (info / "direct_url.json").write_text(json.dumps(direct))
    (probe.site_packages / "probe_plugin.pth").write_text(f"{project / 'src'}\n")
    return probe

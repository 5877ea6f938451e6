"""docs/plugins.md's walk-through of a plugin, run as written: scaffold a type and test it,
install it into a running `simrun serve`, submit, edit `units()` and the settings model,
submit again (the new code used, no restart), break the plugin (a message naming it, the
service unharmed), resume with a setting written differently (every unit reused), explain a
miss before running.

The doc's blocks run in order in one bash session, in a directory whose `.venv` is an
environment of its own that sees the service's packages (so `simrun plugin install` changes
that one, not the `.venv` every test shares), with a data directory of their own: the
embedded default, as a newcomer has it (SQLite, the file broker, the local backend).
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import uv

from tests.docs.test_walkthroughs import ROOT, blocks, fresh_env
from tests.e2e.commands import free_port, kill_all

pytestmark = [pytest.mark.slow]
DOC = "docs/plugins.md"


def own_environment(venv: Path) -> Path:
    """A virtual environment seeing the service's packages, with every console script of the
    service's `.venv` (simrun, celery, uvicorn, the harness's) started by its own Python."""
    subprocess.run([uv.find_uv_bin(), "venv", "-q", "--python", sys.executable, venv], check=True)
    [site] = (venv / "lib").glob("python*/site-packages")
    service_site = sysconfig.get_paths()["purelib"]
    (site / "service.pth").write_text(f"import site; site.addsitedir({service_site!r})\n")
    python = venv / "bin" / "python"
    for script in (ROOT / ".venv" / "bin").iterdir():
        if (venv / "bin" / script.name).exists() or not script.is_file():
            continue
        text = script.read_bytes()
        if not text.startswith(b"#!") or b"python" not in text.split(b"\n", 1)[0]:
            continue
        body = text.split(b"\n", 1)[1]
        (venv / "bin" / script.name).write_bytes(f"#!{python}\n".encode() + body)
        (venv / "bin" / script.name).chmod(0o755)
    return venv


IMPORTS_SEEN = """
import os, sys


class _Seen:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "decay":
            with open(RECORD, "a") as record:
                record.write(repr(sys.argv) + "\\n")
        return None


sys.meta_path.insert(0, _Seen())
"""


def record_imports(venv: Path, record: Path) -> None:
    """Every process of `venv` that looks for the plugin's module (`decay`) writes its
    command line to `record`, from a `.pth` file (the hosts get none of the service's
    environment variables: the record's path is written in)."""
    [site] = (venv / "lib").glob("python*/site-packages")
    code = f"RECORD = {str(record)!r}\n{IMPORTS_SEEN}"
    (site / "zz_imports_seen.pth").write_text(f"import sys; exec({code!r}, {{}})\n")


def walkthrough() -> str:
    """The doc's blocks marked e2e, one script: the first scaffolds (it makes `$work`)."""
    steps = [b for b in blocks(DOC) if "e2e" in b.marks]
    assert len(steps) >= 5, "the walk-through's blocks are marked e2e"
    assert "plugin new" in steps[0].text, "the walk-through starts with `simrun plugin new`"
    return "\n".join(b.text for b in steps)


def test_the_plugin_walkthrough_runs_as_written(tmp_path: Path) -> None:
    place = tmp_path / "checkout"
    place.mkdir()
    own_environment(place / ".venv")
    imports = tmp_path / "imports.txt"
    record_imports(place / ".venv", imports)
    data_dir = tmp_path / "data"
    # uv's cache as set-up left it (a home of its own would hide it: with the package index
    # unreachable, what set-up downloaded is all there is)
    cache = subprocess.run(
        [uv.find_uv_bin(), "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    env = fresh_env(tmp_path / "home")
    env.update(SIMRUN_DATA_DIR=str(data_dir), SIMRUN_PORT=str(free_port()), UV_CACHE_DIR=cache)
    (tmp_path / "home").mkdir()
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", walkthrough()],
            cwd=place,
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
        )
    finally:
        kill_all(data_dir)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "\n8\n" in done.stdout, said  # the edited units(): two curves per rate
    assert "failed to load from plugin decay 0.1.0" in said
    assert "reused 8 of 8 units" in done.stdout
    assert "setting 'n_points' differs" in done.stdout
    # the plugin's code ran in plugin hosts (and the plugin's own tests), never in a service
    # process: no web, Celery or watcher process as much as looked for its module
    seen = {line for line in imports.read_text().splitlines()}
    assert any("simrun_harness/plugin_host.py" in line for line in seen), seen
    services = ("uvicorn", "celery", "manage.py", "runs.cli.main", "bin/simrun")
    assert not [line for line in seen if any(s in line for s in services)], seen

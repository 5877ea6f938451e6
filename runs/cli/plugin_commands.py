"""`simrun plugin new|install|list`: write a plugin, make it known, see what is installed.

None of them sets Django up: the list reads the entry points' metadata (`--check` has a
plugin host load each type, never this process, to name the ones that fail), and install is
`uv pip install -e` into the Python the service runs with (with this simrun's own harness
when that Python has none: the harness is on no index): a running service uses it at its
next question, with no restart.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from runs.cli.base import CommandError

HARNESS = "simrun-harness"


def register(sub: Any) -> None:
    plugin = sub.add_parser("plugin", help="write, install and list task-type plugins")
    verbs = plugin.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = verbs.add_parser("new", help="write a model directory with a plugin of type NAME inside")
    p.add_argument("name", help="the task type's name: lowercase letters, digits and _")
    p.add_argument("--dir", type=Path, default=Path("."), help="where to write it (default: .)")
    p.set_defaults(handler=new)
    p = verbs.add_parser("install", help="install a plugin package where the service runs")
    p.add_argument("path", type=Path, help="the plugin's directory (with its pyproject.toml)")
    p.add_argument(
        "--python", default=sys.executable, help="the service's Python (default: this one)"
    )
    p.set_defaults(handler=install)
    p = verbs.add_parser("list", help="every task type: its package, version and source")
    p.add_argument("--check", action="store_true", help="import each type; name the failures")
    p.set_defaults(handler=list_plugins)


def new(args: argparse.Namespace) -> int:
    from runs.plugin_scaffold import ScaffoldRefused, scaffold

    try:
        root = scaffold(name=args.name, parent=args.dir)
    except ScaffoldRefused as exc:
        raise CommandError(str(exc)) from None
    print(f"wrote {root}: the model directory; the plugin is {root / 'plugin'}")
    print(f"next: simrun plugin install {root / 'plugin'}")
    return 0


def install(args: argparse.Namespace) -> int:
    import tempfile

    import uv

    path = args.path.resolve()
    if not (path / "pyproject.toml").is_file():
        raise CommandError(f"{args.path}: no pyproject.toml; give the plugin's directory")
    with tempfile.TemporaryDirectory(prefix="simrun-plugin-install-") as scratch:
        command = [uv.find_uv_bin(), "pip", "install", "--python", args.python, "-e", str(path)]
        command += harness_from_here(args.python, Path(scratch))
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
        raise CommandError(f"installing {args.path} failed:\n{tail}")
    print(f"installed {path} (editable) into {args.python}")
    return 0


def harness_from_here(python: str, scratch: Path) -> list[str]:
    """What `uv pip install` needs beside the plugin so its dependency on the harness is met
    from this project, never from a package index (the harness is on none): nothing when the
    target Python has the harness installed; else this simrun's own copy, from the directory
    it was installed from, with every package pinned to the version this process runs (uv's
    cache has those since set-up, so it works offline too)."""
    import json
    from importlib import metadata
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    import uv

    shown = [uv.find_uv_bin(), "pip", "show", "--python", python, HARNESS]
    if subprocess.run(shown, capture_output=True).returncode == 0:
        return []
    harness = metadata.distribution(HARNESS)
    direct = json.loads(harness.read_text("direct_url.json") or "{}")
    url = str(direct.get("url", ""))
    if not url.startswith("file://") or "dir_info" not in direct:
        raise CommandError(
            f"{python} has no {HARNESS}, and this simrun's copy was not installed from a "
            f"directory: install {HARNESS} into {python} first"
        )
    source = url2pathname(urlparse(url).path)
    pins = scratch / "constraints.txt"
    versions: dict[str, str] = {}
    for dist in metadata.distributions():  # the first of a name on the path, as imported
        name = dist.metadata["Name"]
        if name and dist.read_text("direct_url.json") is None:
            versions.setdefault(name.lower(), f"{name}=={dist.version}\n")
    pins.write_text("".join(versions.values()))
    editable = ["-e"] if direct["dir_info"].get("editable") else []
    return [*editable, source, "--constraints", str(pins)]


def list_plugins(args: argparse.Namespace) -> int:
    from runs.task_types import COMMAND, registry
    from runs.type_refusals import TypeUnavailable

    types = registry()
    print(f"{'TYPE':20} {'PACKAGE':24} {'VERSION':10} SOURCE")
    print(f"{COMMAND:20} {'simrun':24} {'':10} built-in")
    failed = 0
    for name, found in sorted(types.plugins().items()):
        for plugin in found:
            print(f"{name:20} {plugin.package:24} {plugin.version:10} {plugin.source}")
        if args.check:
            try:
                types[name]  # loaded by a plugin host, never in this process
            except TypeUnavailable as exc:
                failed += 1
                print(f"  error: {exc}")
    return 1 if failed else 0

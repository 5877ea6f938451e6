"""A standby pod process: started and imported ahead of its attempt.

    python -m simrun_harness.standby <in fd> <out fd> <log>

The local backend keeps one per environment (cluster/local/standby.py) so that a pod does not
pay for an interpreter and its imports (pydantic, the harness, the plugin: ~0.2 CPU s) after
its attempt was launched. The standby imports what a pod of its environment imports — the
console modules of the harness and every installed task-type plugin — then writes `ready`
on `out fd` and waits on `in fd` for its attempt: the command, environment, working directory
and log its supervisor would have started a fresh process with. It takes them over (the
environment, the directory, its output going to the log, the process name) and runs the
command's `main` in this process, so the exit code, the report and the signals are the
command's own.

Before it takes an attempt it looks again at what it imported: the directories of the
import path (installing, upgrading or removing a distribution changes them, as
`runs.task_types.installed_stamp` says), every file of every imported module, and every file
of a plugin installed from a directory (editable or local, PEP 610: its code may change
without a new version). If anything changed it answers `stale` and exits; its supervisor
then starts a fresh process, which imports the current code. It also exits when `in fd`
closes (its supervisor is gone), so a standby never outlives the service that wanted it.

Only the standard library is imported at the top: the supervisor imports this module for
the messages, without loading the harness.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

SCRIPTS = {
    "simrun-worker": "simrun_harness.worker:main",
    "simrun-exec": "simrun_harness.exec:main",
    "simrun-merge": "simrun_harness.merge:main",
}
"""The console scripts a standby can run, by the entry point they are installed with."""
ENTRY_POINT_GROUP = "simrun.task_types"  # simrun_harness.plugin's, without importing pydantic
SKIPPED_DIRS = frozenset(
    {".git", "__pycache__", ".venv", ".simrun", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
    | {"build", "dist", ".tox", ".nox"}
)
"""Not a plugin's code (as runs.local_packages skips them when it digests a package)."""
READY = b"ready\n"
OK = "ok"
_PR_SET_NAME = 15

Stamp = dict[str, tuple[int, int]]
"""A file or directory by path: its modification time (ns) and size."""


class Refused(Exception):
    """The attempt is not for this standby; the message says why."""


def handoff_message(*, args: Sequence[str], env: Mapping[str, str], cwd: str, log: str) -> bytes:
    """What a supervisor sends its standby: one line of JSON."""
    message = {"v": 1, "args": list(args), "env": dict(env), "cwd": cwd, "log": log}
    return json.dumps(message).encode() + b"\n"


def _stat(path: str, found: Stamp) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    found[path] = (st.st_mtime_ns, st.st_size)


def project_dirs() -> list[str]:
    """The directories of task-type plugins installed from a directory (PEP 610)."""
    from importlib.metadata import entry_points

    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            direct = json.loads((ep.dist and ep.dist.read_text("direct_url.json")) or "null")
        except (OSError, ValueError):
            continue
        url = direct.get("url", "") if isinstance(direct, dict) else ""
        if url.startswith("file://"):
            path = unquote(urlparse(url).path)
            if os.path.isdir(path) and path not in found:
                found.append(path)
    return found


def stamp(projects: Sequence[str], modules: Sequence[str] = (), *, path: bool = True) -> Stamp:
    """The stamps of what this process runs: the files of the plugins' `projects`
    (`project_dirs`), the files of `modules` (`module_files`) and, with `path`, the import
    path's directories."""
    found: Stamp = {}
    for project in projects:
        for folder, dirs, files in os.walk(project):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
            for name in files:
                _stat(os.path.join(folder, name), found)
    for entry in sys.path if path else ():
        _stat(entry or ".", found)
    for module in modules:
        _stat(module, found)
    return found


def module_files() -> list[str]:
    """The files of the modules imported so far."""
    found = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            found.append(path)
    return found


def changed(before: Stamp, now: Stamp) -> str | None:
    """The first path whose stamp differs (changed, new or gone), None when none does."""
    for path in sorted(before.keys() | now.keys()):
        if before.get(path) != now.get(path):
            return path
    return None


def prepare() -> dict[str, Callable[[], Any]]:
    """Import the console modules and every plugin; the mains of the scripts this
    environment installs from the harness, by script name."""
    from importlib.metadata import entry_points

    mains: dict[str, Callable[[], Any]] = {}
    for ep in entry_points(group="console_scripts"):
        if SCRIPTS.get(ep.name) == ep.value:
            mains[ep.name] = ep.load()
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception:  # a plugin that fails to import fails its own pods, as when fresh
            continue
    return mains


def _read_line(fd: int) -> bytes:
    """One line from `fd`; b"" when it closed first."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 65536)
        if not chunk:
            return b""
        data += chunk
    return data


def _set_name(name: str) -> None:
    """The process's name (`comm`) as a fresh script's would be (`ps`, `top`, psutil)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _check(message: dict[str, Any], mains: Mapping[str, Callable[[], Any]]) -> str:
    """The script the attempt runs; Refused when this standby cannot run it as a fresh
    process would."""
    args = message["args"]
    if len(args) != 1 or args[0] not in SCRIPTS:
        raise Refused(f"not a harness command: {args}")
    if args[0] not in mains or not (Path(sys.executable).parent / args[0]).is_file():
        raise Refused(f"{args[0]} is not the harness's script in this environment")
    if not os.path.isdir(message["cwd"]):
        raise Refused(f"no directory {message['cwd']}")
    return str(args[0])


def take(message: dict[str, Any], name: str, own_log: str) -> None:
    """Become the attempt's process: its directory, its log (after what this standby printed
    while it imported), its environment, its name."""
    log = os.open(message["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        with open(own_log, "rb") as early:
            os.write(log, early.read())
    except OSError:
        pass
    os.chdir(message["cwd"])
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.environ.clear()
    os.environ.update(message["env"])
    sys.argv = [str(Path(sys.executable).parent / name)]
    _set_name(name)
    importlib.invalidate_caches()


def serve(fd_in: int, fd_out: int, own_log: str) -> Callable[[], Any] | None:
    """Wait for the attempt and take it; its main, None when there is none to run."""
    projects = project_dirs()
    # the plugins' files before the imports, so one edited during them is stale too; the
    # rest after (the imports may write bytecode beside a module, changing its directory)
    before = stamp(projects, path=False)
    mains = prepare()
    modules = module_files()
    before = {**stamp((), modules), **before}
    os.write(fd_out, READY)
    line = _read_line(fd_in)
    if not line:
        return None  # the supervisor is gone
    message = json.loads(line)
    try:
        name = _check(message, mains)
        path = changed(before, stamp(projects, modules))
        if path is not None:
            raise Refused(f"stale: {path} changed since the standby started")
        take(message, name, own_log)
    except (Refused, OSError) as exc:
        os.write(fd_out, f"{exc}\n".encode())
        return None
    os.write(fd_out, f"{OK}\n".encode())
    return mains[name]


def main() -> None:
    fd_in, fd_out, own_log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    # as a fresh console script has it: its directory first on the import path, not ours
    sys.path[0] = str(Path(sys.executable).parent)
    run = serve(fd_in, fd_out, own_log)
    os.close(fd_in)
    os.close(fd_out)
    Path(own_log).unlink(missing_ok=True)
    if run is None:
        sys.exit(0)
    run()


if __name__ == "__main__":
    main()

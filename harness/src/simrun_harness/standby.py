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

Before it takes an attempt it looks again at what it runs, as stamped before anything was
read: the directories of the import path and their `.pth` files (installing, upgrading or
removing a distribution changes them, as `runs.task_types.installed_stamp` says; a `.pth`
may point elsewhere), the file of every module (stamped by `sources.SourceFinder` just before
it was read), and every file of a plugin installed from a directory (editable or local, PEP
610: its code may change without a new version; its modules' bytecode is checked by hash,
see `simrun_harness.sources`). Freshness is judged by content, never by the change time: uv
hard-links the files of its cache into every environment of the machine, so another
environment's install moves the change time of files this one imported without changing a
byte of them. A plugin's own files and the `.pth` files are stamped by their size and a hash
of their bytes (an edit in place that puts the modification time back is still seen); the
other files, which installs replace rather than rewrite, by their size, modification time
and inode. If anything changed it answers `stale` and exits; its supervisor then starts a
fresh process, which imports the current code. A standby whose imports looked up a SIMRUN_*
variable (which only an attempt has) never says `ready`: it says why and exits. It also exits
when `in fd` closes or its supervisor dies, so a standby never outlives the service that
wanted it.

The environment it takes is the attempt's plus what this process changed in its own since it
started (Python's locale coercion, `LC_CTYPE`; variables its imports set): what a fresh
process of the attempt would have in `os.environ`, which its subprocesses inherit.

Only the standard library is imported at the top: the supervisor imports this module for
the messages, without loading the harness.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import json
import os
import signal
import stat
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from simrun_harness import sources

SCRIPTS = {
    "simrun-worker": "simrun_harness.worker:main",
    "simrun-exec": "simrun_harness.exec:main",
    "simrun-merge": "simrun_harness.merge:main",
}
"""The console scripts a standby can run, by the entry point they are installed with."""
ENTRY_POINT_GROUP = sources.ENTRY_POINT_GROUP
SKIPPED_DIRS = frozenset(
    {".git", "__pycache__", ".venv", ".simrun", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
    | {"build", "dist", ".tox", ".nox"}
)
"""Not a plugin's code (as runs.local_packages skips them when it digests a package)."""
READY = b"ready\n"
OK = "ok"
_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15
ATTEMPT_PREFIX = "SIMRUN_"

Stamp = dict[str, tuple[int, int, int | str]]
"""A file or directory by path: its size and either its modification time (ns) and inode,
or -1 and a SHA-256 of its bytes (`hashed`)."""


class Refused(Exception):
    """The attempt is not for this standby; the message says why."""


def handoff_message(*, args: Sequence[str], env: Mapping[str, str], cwd: str, log: str) -> bytes:
    """What a supervisor sends its standby: one line of JSON."""
    message = {"v": 1, "args": list(args), "env": dict(env), "cwd": cwd, "log": log}
    return json.dumps(message).encode() + b"\n"


def _hashed(path: str, projects: Sequence[str]) -> bool:
    """Whether `path` is stamped by its bytes: a plugin's own file, or a `.pth` file."""
    return path.endswith(".pth") or any(
        path.startswith(os.path.join(project, "")) for project in projects
    )


def _stat(path: str, found: Stamp, projects: Sequence[str] = ()) -> None:
    try:
        st = os.stat(path)
        if _hashed(path, projects) and stat.S_ISREG(st.st_mode):
            with open(path, "rb") as f:
                found[path] = (st.st_size, -1, hashlib.file_digest(f, "sha256").hexdigest())
            return
    except OSError:
        return
    found[path] = (st.st_size, st.st_mtime_ns, st.st_ino)


def stamp(projects: Sequence[str], files: Sequence[str] = ()) -> Stamp:
    """The stamps of every file of the plugins' `projects` (`sources.project_dirs`) and of
    `files` (those inside a project or `.pth` by their bytes)."""
    found: Stamp = {}
    for project in projects:
        for folder, dirs, names in os.walk(project):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
            for name in names:
                _stat(os.path.join(folder, name), found, projects)
    for path in files:
        _stat(path, found, projects)
    return found


def path_files() -> list[str]:
    """The import path's directories and their `.pth` files (an edit in place of one, which
    may point the path elsewhere, leaves its directory as it was)."""
    found = []
    for entry in sys.path:
        found.append(entry or ".")
        try:
            with os.scandir(entry or ".") as listing:
                found += [e.path for e in listing if e.name.endswith(".pth")]
        except OSError:
            continue
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


class _WatchedEnviron(os._Environ[str]):
    """`os.environ` while the standby imports: it notes the SIMRUN_* variables looked up."""

    looked_up: set[str] = set()

    def __getitem__(self, key: str) -> str:
        if isinstance(key, str) and key.startswith(ATTEMPT_PREFIX):
            _WatchedEnviron.looked_up.add(key)
        return super().__getitem__(key)


@contextmanager
def attempt_variables_looked_up() -> Iterator[set[str]]:
    """While it lasts, the SIMRUN_* variables looked up in `os.environ` (`[]`, `get`, `in`,
    `os.getenv`) are noted in the set it gives: a module that reads one at import would have
    read the attempt's value in a fresh process, this standby has none."""
    plain = type(os.environ)
    _WatchedEnviron.looked_up = set()
    os.environ.__class__ = _WatchedEnviron
    try:
        yield _WatchedEnviron.looked_up
    finally:
        os.environ.__class__ = plain


def attempt_environ(env: Mapping[str, str], now: Mapping[str, str]) -> dict[str, str]:
    """What a fresh process of the attempt whose environment is `env` has in `os.environ`:
    `env`, and what this process (`now`: its `os.environ`) changed since it started with
    `env` less its SIMRUN_* variables (the claim saw to that) — the locale Python coerced,
    the variables its imports set or removed."""
    started = {k: v for k, v in env.items() if not k.startswith(ATTEMPT_PREFIX)}
    result = dict(env)
    result.update((k, v) for k, v in now.items() if started.get(k) != v)
    for key in started.keys() - now.keys():
        del result[key]
    return result


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
    env = attempt_environ(message["env"], os.environ)
    os.environ.clear()  # putenv/unsetenv too: the process's own environment, which children get
    os.environ.update(env)
    sys.argv = [str(Path(sys.executable).parent / name)]
    _set_name(name)
    importlib.invalidate_caches()


def imported() -> tuple[dict[str, Callable[[], Any]], list[str], Stamp, set[str]]:
    """Import what a pod of this environment imports (`prepare`), stamping every file first
    (the import path, each module's file just before it is read, every file of a plugin
    project before any import); the mains, the projects, the stamps and the SIMRUN_*
    variables the imports looked up."""
    before = stamp((), module_files() + path_files())  # what the interpreter's start loaded
    projects: list[str] = []

    def seen(path: str) -> None:
        if path not in before:
            _stat(path, before, projects)

    finder = sources.install()
    finder.seen = seen
    projects += sources.project_dirs()
    finder.add_projects(projects)
    for path, found in stamp(projects).items():
        before.setdefault(path, found)
    with attempt_variables_looked_up() as looked_up:
        mains = prepare()
    finder.seen = None
    for path in module_files():  # a module that came by no finder: now, at least
        seen(path)
    return mains, projects, before, looked_up


def serve(fd_in: int, fd_out: int, own_log: str) -> Callable[[], Any] | None:
    """Wait for the attempt and take it; its main, None when there is none to run."""
    mains, projects, before, looked_up = imported()
    if looked_up:  # never ready: its supervisor notes why (`failed`), or a claim hears it
        why = f"its imports read {', '.join(sorted(looked_up))}, which only an attempt has"
        print(f"standby: {why}", flush=True)
        os.write(fd_out, f"{why}\n".encode())
        return None
    os.write(fd_out, READY)
    line = _read_line(fd_in)
    if not line:
        return None  # the supervisor is gone
    message = json.loads(line)
    try:
        name = _check(message, mains)
        path = changed(before, stamp(projects, list(before)))
        if path is not None:
            raise Refused(f"stale: {path} changed since the standby started")
        take(message, name, own_log)
    except (Refused, OSError) as exc:
        os.write(fd_out, f"{exc}\n".encode())
        return None
    os.write(fd_out, f"{OK}\n".encode())
    return mains[name]


def _die_with_parent() -> None:
    """Be killed when the supervisor dies, even while importing (when nothing reads `in fd`)
    or running its attempt (whose supervisor's loss the backend settles by killing the pod)."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before that
        os._exit(0)


def main() -> None:
    _die_with_parent()
    fd_in, fd_out, own_log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    # as a fresh console script has it: its directory first on the import path, not ours
    sys.path[0] = str(Path(sys.executable).parent)
    run = serve(fd_in, fd_out, own_log)
    os.close(fd_in)
    os.close(fd_out)
    if run is None:  # its log stays for its supervisor to read (why it ended) and remove
        sys.exit(0)
    Path(own_log).unlink(missing_ok=True)  # copied into the attempt's
    run()


if __name__ == "__main__":
    main()

"""A pod's tie to the `simrun serve` whose services started it: it ends when serve ends, and
it is on serve's record of processes until then.

`simrun serve` passes two variables to its services, which pass them on to every supervisor
they start (`launcher.supervisor_env`):

- `SIMRUN_SERVE`, `<pid>:<start time>` of serve. A supervisor watches that process (a pidfd,
  no polling) and, when serve is gone however it went (a `kill -9` too), stops its pod as on
  SIGTERM: the pod returns its claims and exits 143, or is killed after its grace;
- `SIMRUN_PROCESS_RECORDS`, a directory where each supervisor keeps `<its pid>.json` while it
  runs: its pod's pid, start time and process group, what it is, and the serve it belongs to.
  `simrun stop` and the next `serve` read it to end what a serve that died left (a pod that
  ignores SIGTERM, or one whose supervisor was killed); the format is in
  docs/local-backend.md ("What stop ends").

Without them (a service started by hand or by a test) a pod is tied to nothing, as before.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from cluster.local.attempts import ProcessId

SERVE_ENV = "SIMRUN_SERVE"
RECORDS_ENV = "SIMRUN_PROCESS_RECORDS"


def serve_identity(env: dict[str, str] | None = None) -> ProcessId | None:
    """The serve a process belongs to, from its environment; None when it belongs to none."""
    text = (env if env is not None else os.environ).get(SERVE_ENV, "")
    pid, _, started = text.partition(":")
    try:
        return ProcessId(int(pid), float(started))
    except ValueError:
        return None


def serve_gone_fd(serve: ProcessId | None) -> int | None:
    """A descriptor that becomes readable when `serve` ends (a pidfd); None when there is no
    serve to watch. Serve already gone (or its pid taken by another process) gives a
    descriptor readable at once."""
    if serve is None:
        return None
    try:
        fd = os.pidfd_open(serve.pid)
    except ProcessLookupError:
        return _readable_now()
    except (AttributeError, OSError):  # no pidfd (Linux < 5.3): not watched
        return None
    if not serve.alive():  # the pid is another process's now
        os.close(fd)
        return _readable_now()
    return fd


def _readable_now() -> int:
    read, write = os.pipe()
    os.close(write)  # end of file: readable
    return read


def record(
    *, supervisor: int, pod: int, what: str, env: dict[str, str] | None = None
) -> Path | None:
    """Put the supervisor and its pod (a process group of its own) on serve's record."""
    folder = (env if env is not None else os.environ).get(RECORDS_ENV)
    if not folder:
        return None
    path = Path(folder) / f"{supervisor}.json"
    data = {
        "what": what,
        "serve": (env if env is not None else os.environ).get(SERVE_ENV, ""),
        "processes": [
            {**ProcessId.of(supervisor).to_json(), "group": None, "role": "supervisor"},
            {**ProcessId.of(pod).to_json(), "group": pod, "role": "pod"},
        ],
    }
    with contextlib.suppress(OSError):
        Path(folder).mkdir(parents=True, exist_ok=True)
        staged = path.with_name(f".{path.name}.tmp")
        staged.write_text(json.dumps(data))
        os.replace(staged, path)
        return path
    return None


def unrecord(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()

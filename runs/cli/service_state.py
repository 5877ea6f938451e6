"""What `simrun serve` keeps in the data directory: `services.json`, what it runs (for `status`,
`stop` and the commands that talk to it), and `cli_token`, the owner's token those commands
send (0600, renewed by serve when the database no longer knows it).

`serve` rewrites `services.json` whole (a temporary file renamed into place, so a reader sees
the old or the new one) whenever a service starts, exits or restarts, and removes it when it
has stopped. A file left by a `serve` that was killed is recognised by its process id and
start time.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "services.json"
TOKEN_FILE = "cli_token"


@dataclass
class ServiceRecord:
    """One service as `status` shows it."""

    name: str
    pid: int | None
    up_since: float | None  # epoch seconds of its current start
    restarts: int
    log: str
    state: str  # running, restarting (waiting out its backoff), stopped
    started: float | None = None  # its process's create_time (a later process with its pid
    # is not it), for ending what a serve that died left (runs/cli/leftovers.py)
    sign_at: float | None = None  # its last sign of life (runs/cli/liveness.py), epoch
    sign: str = ""  # what that sign was: "answered /healthz", "reconciled" ...
    cause: str = ""  # why it was last restarted: "exited with code -9", "showed no sign ..."
    cause_at: float | None = None  # when


@dataclass
class ServeRecord:
    """The `serve` process and its services."""

    pid: int
    started: float  # the process's create_time, to tell it from a later one with its pid
    url: str
    services: list[ServiceRecord] = field(default_factory=list)
    store: str = ""  # the run store of the services (the CLI writes snapshots into it)

    def alive(self) -> bool:
        """True while this very serve process runs."""
        import psutil  # here: a command that finds no state file need not load it

        try:
            process = psutil.Process(self.pid)
            running = process.status() != psutil.STATUS_ZOMBIE
            return running and abs(process.create_time() - self.started) < 1.0
        except psutil.Error:
            return False


def state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def write_state(data_dir: Path, record: ServeRecord) -> None:
    """Replace the state file with `record`, atomically."""
    path = state_path(data_dir)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=data_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(asdict(record), handle, indent=1)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def read_state(data_dir: Path) -> ServeRecord | None:
    """The record of the last `serve` here, or None when there is none (or it is unreadable)."""
    try:
        data: dict[str, Any] = json.loads(state_path(data_dir).read_text())
        services = [ServiceRecord(**s) for s in data.pop("services")]
        return ServeRecord(**data, services=services)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def remove_state(data_dir: Path, *, pid: int) -> None:
    """Remove the state file if it is still this serve's."""
    record = read_state(data_dir)
    if record is not None and record.pid == pid:
        state_path(data_dir).unlink(missing_ok=True)


def read_token(data_dir: Path) -> str | None:
    try:
        return (data_dir / TOKEN_FILE).read_text().strip() or None
    except OSError:
        return None


def write_token(data_dir: Path, secret: str) -> None:
    """Keep `secret` in the data directory, readable by this user only (0600 before the
    secret is written, replaced atomically)."""
    path = data_dir / TOKEN_FILE
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, secret.encode())
    finally:
        os.close(fd)
    os.replace(temporary, path)

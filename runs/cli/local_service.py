"""The running `simrun serve` of this machine's installation, found without Django.

`serve` records its URL and run store in `services.json` (`runs/cli/service_state.py`) and
keeps a bearer token of the owner in `cli_token` (0600, in the private data directory). A
command that finds both, with that very `serve` process alive, talks to it over HTTP and
never sets Django up; otherwise it works on the database directly, as before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from runs.cli.service_state import read_state
from simrun_site import installation

TOKEN_FILE = "cli_token"


@dataclass(frozen=True)
class LocalService:
    """What a command needs to reach the running service."""

    url: str
    token: str
    store: Path  # the run store the service uses: the commands write snapshots into it


def data_dir(cwd: Path | None = None) -> Path | None:
    """The installation's data directory as the settings would find it; None when there is
    none (or its variable cannot be read: the settings then say what is wrong)."""
    name = installation.VARIABLE
    value = os.environ.get(name, "").strip()
    file = os.environ.get(f"{name}_FILE")
    if file and not value:
        try:
            value = Path(file).read_text().strip()
        except OSError:
            return None
    if value:
        return Path(value).expanduser().resolve()
    return installation.nearest((cwd or Path.cwd()).resolve())


def token_path(folder: Path) -> Path:
    return folder / TOKEN_FILE


def read_token(folder: Path) -> str | None:
    try:
        return token_path(folder).read_text().strip() or None
    except OSError:
        return None


def write_token(folder: Path, secret: str) -> None:
    """Keep `secret` in the data directory, readable by this user only (made 0600 before the
    secret is written, replaced atomically)."""
    path = token_path(folder)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, secret.encode())
    finally:
        os.close(fd)
    os.replace(temporary, path)


def running_service(cwd: Path | None = None) -> LocalService | None:
    """The service of this installation when its `serve` runs and left a token; else None.

    Not with SIMRUN_IDENTITY set: the token is the owner's, and that variable asks to act as
    someone else (which only the direct way can do)."""
    if os.environ.get("SIMRUN_IDENTITY"):
        return None
    folder = data_dir(cwd)
    if folder is None:
        return None
    record = read_state(folder)
    if record is None or not record.url or not record.store or not record.alive():
        return None
    token = read_token(folder)
    if token is None:
        return None
    return LocalService(url=record.url, token=token, store=Path(record.store))

"""Answers of plugin hosts kept on disk, by a digest of the question and of the plugin's code.

A workflow validated once is validated again without starting a plugin host (`simrun
validate` is a fresh process each time): what a type is, its settings checked, its units
counted are kept under a key that holds the environment, the digest of the plugin's files
(`runs.plugin_metadata`) and the question, so an edit of the plugin is a new key and never
answered from here. One small JSON file per answer under `SIMRUN_PLUGIN_CACHE` (default
`~/.cache/simrun/plugins`), written through a
temporary name; at most `MAX_ENTRIES`, the oldest removed first.

No Django here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

MAX_ENTRIES = 20_000


def root() -> Path:
    configured = os.environ.get("SIMRUN_PLUGIN_CACHE")
    if configured:
        return Path(configured)
    return Path(os.path.expanduser("~")) / ".cache" / "simrun" / "plugins"


def key_of(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _path(key: str) -> Path:
    return root() / key[:2] / f"{key}.json"


def get(key: str) -> Any | None:
    """The answer kept under `key`, None when there is none (or it cannot be read)."""
    try:
        return json.loads(_path(key).read_text())
    except (OSError, ValueError):
        return None


def put(key: str, value: Any) -> None:
    """Keep `value` under `key`; quietly nothing where the cache cannot be written."""
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(value))
        os.replace(tmp, path)
    except OSError:
        return
    if int.from_bytes(bytes.fromhex(key[:4]), "big") % 256 == 0:  # now and then
        _prune()


def _prune() -> None:
    """Remove the oldest answers beyond MAX_ENTRIES."""
    with contextlib.suppress(OSError):
        files = [p for d in root().iterdir() if d.is_dir() for p in d.glob("*.json")]
        if len(files) <= MAX_ENTRIES:
            return
        files.sort(key=lambda p: p.stat().st_mtime)
        for old in files[: len(files) - MAX_ENTRIES]:
            with contextlib.suppress(OSError):
                old.unlink()

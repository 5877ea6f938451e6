"""A run store seen through a stale negative lookup cache, as an NFS client may see it (C20).

An NFS client remembers that a name was missing (a negative dentry) and answers later lookups
of that name from the cache until it revalidates the directory; a listing of the directory
(READDIR) asks the server and sees the file at once. `NegativeLookupCache` reproduces that on a
local directory: a lookup (`os.stat`, `os.lstat`, `os.access`, so `Path.exists`, `is_file`,
`os.path.exists`) that missed keeps missing for that path until its parent is listed
(`os.listdir`, `os.scandir`, so `Path.iterdir`). The files themselves are real.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


class NegativeLookupCache:
    """Lookups under `root` answer from a negative cache; listings are fresh."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.missed: set[Path] = set()
        self.stale_answers = 0  # lookups answered "missing" from the cache

    def install(self, monkeypatch: pytest.MonkeyPatch) -> NegativeLookupCache:
        for name in ("stat", "lstat"):
            monkeypatch.setattr(os, name, self._lookup(getattr(os, name)))
        real_access = os.access

        def access(path: Any, mode: int, *args: Any, **kwargs: Any) -> bool:
            if self._cached_miss(path):
                self.stale_answers += 1
                return False
            found = real_access(path, mode, *args, **kwargs)
            if not found and mode == os.F_OK:
                self._note_miss(path)
            return found

        monkeypatch.setattr(os, "access", access)
        real_listdir, real_scandir = os.listdir, os.scandir

        def listdir(path: Any = ".") -> list[str]:
            self._revalidate(path)
            return real_listdir(path)

        def scandir(path: Any = ".") -> Iterator[os.DirEntry[str]]:
            self._revalidate(path)
            return real_scandir(path)  # type: ignore[return-value]

        monkeypatch.setattr(os, "listdir", listdir)
        monkeypatch.setattr(os, "scandir", scandir)
        return self

    def _key(self, path: Any) -> Path | None:
        if isinstance(path, int):
            return None  # a file descriptor: no lookup by name
        full = Path(os.path.abspath(os.fsdecode(path)))
        return full if full.is_relative_to(self.root) else None

    def _cached_miss(self, path: Any) -> bool:
        key = self._key(path)
        return key is not None and key in self.missed

    def _note_miss(self, path: Any) -> None:
        key = self._key(path)
        if key is not None:
            self.missed.add(key)

    def _lookup(self, real: Any) -> Any:
        def lookup(path: Any, *args: Any, **kwargs: Any) -> Any:
            if self._cached_miss(path):
                self.stale_answers += 1
                raise FileNotFoundError(errno.ENOENT, "negative lookup cached", os.fsdecode(path))
            try:
                return real(path, *args, **kwargs)
            except FileNotFoundError:
                self._note_miss(path)
                raise

        return lookup

    def _revalidate(self, directory: Any) -> None:
        """A listing asks the server: the cached misses of its entries are dropped."""
        key = self._key(directory)
        if key is not None:
            self.missed = {p for p in self.missed if p.parent != key}

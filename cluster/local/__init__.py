"""The local backend: this machine is one node, pods are supervised process groups.

`LocalBackend` is imported lazily, so the supervisor (`python -m cluster.local.supervisor`)
starts without loading the backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cluster.local.backend import LocalBackend

__all__ = ["LocalBackend"]


def __getattr__(name: str) -> Any:
    if name == "LocalBackend":
        from cluster.local.backend import LocalBackend

        return LocalBackend
    raise AttributeError(name)

"""The backend of these settings, one per process."""

from __future__ import annotations

from functools import cache

from django.conf import settings

from cluster.backend import Backend


@cache
def backend() -> Backend:
    """The local backend (embedded default) or the Argo backend, as SIMRUN_BACKEND says."""
    if settings.SIMRUN_BACKEND == "local":
        from cluster.local.backend import LocalBackend
        from runs.priorities import value_of

        return LocalBackend(
            settings.SIMRUN_STORE,
            cores=settings.SIMRUN_LOCAL_CORES or None,
            memory_gb=settings.SIMRUN_LOCAL_MEMORY_GB or None,
            priority_value=value_of,
            poll_s=min(1.0, settings.SIMRUN_POLL_S),
        )
    raise NotImplementedError("the Argo backend is not part of this build yet")

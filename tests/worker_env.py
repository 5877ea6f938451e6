"""Each process of a parallel test run (pytest-xdist) gets a Redis database and a Celery queue
of its own, so two processes never take each other's tasks or count each other's requests.

Loaded as a plugin (`-p tests.worker_env`, pyproject's addopts) so that it runs before
pytest-django reads the settings; xdist names the process (`PYTEST_XDIST_WORKER`, gw0, gw1, …)
before that. The test database needs nothing here: pytest-django gives each process its own.
"""

from __future__ import annotations

import os
import re

DEFAULT_REDIS = "redis://127.0.0.1:6379/15"


def worker_redis(url: str, worker: int) -> str:
    """The Redis URL of process `worker`: the database `worker` below the given one."""
    found = re.fullmatch(r"(redis://[^/]+)/(\d+)", url)
    if found is None:
        raise SystemExit(f"SIMRUN_TEST_REDIS_URL={url!r}: give redis://host:port/<database>")
    database = int(found.group(2)) - worker
    if database < 0:
        raise SystemExit(
            f"SIMRUN_TEST_REDIS_URL={url!r}: too few databases below it for {worker + 1} processes"
        )
    return f"{found.group(1)}/{database}"


def _separate() -> None:
    name = os.environ.get("PYTEST_XDIST_WORKER")
    if not name:
        return
    worker = int(name.removeprefix("gw"))
    shared = os.environ.get("SIMRUN_TEST_REDIS_URL", DEFAULT_REDIS)
    own = worker_redis(shared, worker)
    os.environ["SIMRUN_TEST_REDIS_URL"] = own
    if os.environ.get("CELERY_BROKER_URL", shared) == shared:
        os.environ["CELERY_BROKER_URL"] = own
    queue = os.environ.get("SIMRUN_CELERY_QUEUE", "simrun-test")
    os.environ["SIMRUN_CELERY_QUEUE"] = f"{queue}-{name}"


_separate()

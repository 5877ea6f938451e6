"""The test command's parallel processes each get their own Redis database and Celery queue
(`tests/worker_env.py`), so neither takes the other's tasks nor counts its requests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.worker_env import worker_redis

ROOT = Path(__file__).resolve().parents[1]


def test_each_process_takes_the_database_below_the_last() -> None:
    assert [worker_redis("redis://127.0.0.1:6379/15", n) for n in (0, 1, 2)] == [
        "redis://127.0.0.1:6379/15",
        "redis://127.0.0.1:6379/14",
        "redis://127.0.0.1:6379/13",
    ]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://127.0.0.1:6379", "give redis://host:port/<database>"),
        ("redis://127.0.0.1:6379/1", "too few databases below it for 3 processes"),
    ],
)
def test_a_redis_url_the_processes_cannot_share_is_refused_with_why(url: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        worker_redis(url, 2)


def test_a_worker_process_gets_its_own_database_queue_and_broker() -> None:
    """What a process named gw1 by pytest-xdist sees once the plugin has run."""
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, tests.worker_env; print(os.environ['SIMRUN_TEST_REDIS_URL'], "
            "os.environ['CELERY_BROKER_URL'], os.environ['SIMRUN_CELERY_QUEUE'])",
        ],
        cwd=ROOT,
        env={
            "PYTEST_XDIST_WORKER": "gw1",
            "SIMRUN_TEST_REDIS_URL": "redis://127.0.0.1:6379/15",
            "CELERY_BROKER_URL": "redis://127.0.0.1:6379/15",
            "SIMRUN_CELERY_QUEUE": "simrun-test-7",
        },
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert shown == [
        "redis://127.0.0.1:6379/14",
        "redis://127.0.0.1:6379/14",
        "simrun-test-7-gw1",
    ]

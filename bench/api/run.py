"""Benchmark of the API: the runs list as the database grows, and what a bearer token costs.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_api .venv/bin/python bench/api/run.py

Creates a throwaway database (test_<name>), a run store in a temporary directory and the
runs with `bulk_create`; requests go through Django's test client (the whole middleware and
DRF stack, no network). Rate limits are counted in Redis (SIMRUN_REDIS_URL, else
redis://127.0.0.1:6379/15) as in production, with a limit high enough never to refuse.

1. Runs list (`GET /api/runs/`, a page of 50) with 100 runs, then with 10,000: the 9,900 added
   are older, so the page shows the same runs and only the size of the table differs. The two
   databases exist side by side and are measured in alternating rounds.
   Every tenth run is live with a split task and a ledger (its progress is read). Goal:
   p50 and p99 with 10,000 ÷ with 100 ≤ 1.5, p50 ≤ 50 ms; queries per request constant.
2. A trivial endpoint (`GET /api/whoami/`) with a valid token ÷ without one (401), requests
   interleaved so both see the same machine, through the test client and through the service
   (uvicorn in its own process, its connections pooled as in production) over HTTP. Goal
   ≤ 1.15. Then the runs list with 100 runs over HTTP, for the latency a client sees.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simrun_site.settings")

PAGE = 50
LIVE_EVERY = 10


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def timed(call: Callable[[], Any], samples: int, warmup: int = 20) -> list[float]:
    for _ in range(warmup):
        call()
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return times


def make_runs(first: int, count: int, owner: Any, newest: Any) -> None:
    """Runs b<first>..: older by one minute each; every tenth live with a ledger."""
    from runs.models import Run, Task
    from runs.store import task_paths
    from simrun_harness.ledger import Holder
    from simrun_harness.ledger_creation import create_ledger

    workflow = {"name": "sweep", "tasks": [{"id": "scan", "type": "sleep", "settings": {}}]}
    runs, tasks = [], []
    for i in range(first, first + count):
        live = i % LIVE_EVERY == 0
        run_id = f"b{i:07d}"
        runs.append(
            Run(
                id=run_id,
                name="sweep",
                owner=owner,
                principal=owner,
                tier="person",
                group=f"g{i % 7}",
                state="running" if live else "succeeded",
                workflow=workflow,
                workflow_name=f"simrun-{run_id}",
                ended_at=None if live else newest,
            )
        )
        tasks.append(
            Task(
                run_id=run_id,
                task_id="scan",
                position=0,
                type="sleep",
                splittable=True,
                units_total=8,
                state="running" if live else "done",
            )
        )
        if live:
            create_ledger(task_paths(run_id, "scan"), list(range(8)), Holder("scan-w0", 0))
    Run.objects.bulk_create(runs, batch_size=2000)
    Task.objects.bulk_create(tasks, batch_size=2000)
    for run in runs:  # bulk_create stamps every run now; spread them a minute apart
        index = int(run.id[1:])
        run.created_at = newest - timedelta(minutes=index)
    Run.objects.bulk_update(runs, ["created_at"], batch_size=2000)


def queries(call: Callable[[], Any]) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        call()
    return len(captured)


def use_database(name: str) -> None:
    """Point the default connection at another database (between timed requests)."""
    from django.db import connection

    connection.close()
    connection.settings_dict["NAME"] = name


def clone_database(source: str, target: str) -> None:
    """CREATE DATABASE target TEMPLATE source (no connection to source may be open)."""
    from django.db import connection

    use_database("postgres")
    connection.set_autocommit(True)
    with connection.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{target}"')
        cursor.execute(f'CREATE DATABASE "{target}" TEMPLATE "{source}"')
    use_database(target)


def drop_database(name: str) -> None:
    """Drop a database, ending the connections the server's threads may keep to it."""
    from django.db import connection

    use_database("postgres")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        )
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')


@contextmanager
def served(database: str) -> Iterator[str]:
    """The service (uvicorn, ASGI, one worker) in its own process on `database`; its URL."""
    from django.conf import settings

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + f"/{database}"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "SIMRUN_STORE": str(settings.SIMRUN_STORE),
        "SIMRUN_REDIS_URL": settings.SIMRUN_REDIS_URL,
        "SIMRUN_RATE_LIMIT_PER_MINUTE": str(settings.SIMRUN_RATE_LIMIT_PER_MINUTE),
        "SIMRUN_LOG_LEVEL": "ERROR",
    }
    command = [sys.executable, "-m", "uvicorn", "simrun_site.asgi:application"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "error"]
    server = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the service did not start") from None
                time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def interleaved(
    first: Callable[[], Any], second: Callable[[], Any], samples: int
) -> tuple[list[float], list[float]]:
    """Alternate the two calls so both see the same machine; milliseconds each."""
    for _ in range(20):
        first()
        second()
    a: list[float] = []
    b: list[float] = []
    for _ in range(samples):
        a += timed(first, 1, warmup=0)
        b += timed(second, 1, warmup=0)
    return a, b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.utils import timezone

    from runs.models import Run
    from runs.services.identities import create_identity, create_token

    if connection.vendor != "postgresql":
        print("set DATABASE_URL=postgres://... (the benchmark is for Postgres)")
        return 2
    setup_test_environment()
    logging.disable(logging.WARNING)  # no line per request (401s, httpx)
    store = tempfile.TemporaryDirectory(prefix="simrun-bench-api-")
    settings.SIMRUN_STORE = Path(store.name)
    settings.SIMRUN_REDIS_URL = os.environ.get(
        "SIMRUN_TEST_REDIS_URL", settings.SIMRUN_REDIS_URL or "redis://127.0.0.1:6379/15"
    )
    settings.SIMRUN_RATE_LIMIT_PER_MINUTE = 10**9
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    small = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    large = f"{small}_large"
    try:
        paul = create_identity(name="paul", kind="person", password="bench-pw-123")
        secret = create_token(identity=paul).secret
        newest = timezone.now()
        make_runs(0, 100, paul, newest)
        clone_database(small, large)
        make_runs(100, 9_900, paul, newest)
        assert Run.objects.count() == 10_000
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        authed = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")

        def page() -> None:
            response = authed.get(f"/api/runs/?limit={PAGE}")
            assert response.status_code == 200, response.content
            assert len(response.json()["runs"]) == PAGE

        results: dict[str, Any] = {"small": [], "large": []}
        per_round = max(1, args.samples // args.rounds)
        for _ in range(args.rounds):
            for key, name in (("small", small), ("large", large)):
                use_database(name)
                results[key] += timed(page, per_round, warmup=5)
                results[f"{key}_queries"] = queries(page)
        use_database(small)

        anonymous = Client()
        results["client"] = interleaved(
            lambda: authed.get("/api/whoami/"), lambda: anonymous.get("/api/whoami/"), args.samples
        )
        results["auth_queries"] = queries(lambda: authed.get("/api/whoami/"))
        with served(small) as url, httpx.Client(base_url=url) as http:
            token = {"Authorization": f"Bearer {secret}"}
            results["http"] = interleaved(
                lambda: http.get("/api/whoami/", headers=token),
                lambda: http.get("/api/whoami/"),
                args.samples,
            )
            results["http_list"] = timed(
                lambda: http.get(f"/api/runs/?limit={PAGE}", headers=token), args.samples
            )
        report(results)
    finally:
        drop_database(large)
        drop_database(small)
        store.cleanup()
    return 0


def line(label: str, times: list[float], extra: str = "") -> str:
    p50, p99 = statistics.median(times), percentile(times, 0.99)
    return f"  {label:14} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms{extra}"


def report(results: dict[str, Any]) -> None:
    small, large = results["small"], results["large"]
    print(f"runs list, page of {PAGE}, {len(small)} requests each, rounds interleaved")
    print(line("100 runs", small, f"  queries {results['small_queries']}"))
    print(line("10,000 runs", large, f"  queries {results['large_queries']}"))
    ratio50 = statistics.median(large) / statistics.median(small)
    ratio99 = percentile(large, 0.99) / percentile(small, 0.99)
    print(f"  ratio          p50 {ratio50:6.2f}     p99 {ratio99:6.2f}     (goal <= 1.5)")
    for key, title in (
        ("client", "the Django test client"),
        ("http", "the service (uvicorn) over HTTP"),
    ):
        with_token, without = results[key]
        print(f"whoami through {title}, {len(with_token)} requests each, interleaved")
        print(line("with token", with_token))
        print(line("without (401)", without))
        ratio = statistics.median(with_token) / statistics.median(without)
        print(f"  ratio          p50 {ratio:6.2f}  (goal <= 1.15)")
    print(f"queries of whoami with a token: {results['auth_queries']}")
    print(
        f"runs list (100 runs) through the service over HTTP, {len(results['http_list'])} requests"
    )
    print(line("100 runs", results["http_list"]))


if __name__ == "__main__":
    sys.exit(main())

"""Hostile input against a running service: each class's answer, its time, and the web
process's peak memory above what it held before the request.

    .venv/bin/python bench/api/hostile.py [--repeat 5] [--all]

Starts the service as bench/api/run.py does (uvicorn, ASGI, one process) on a throwaway
database (bench/local/_stack.py) and sends every class over HTTP with a valid token: the
workflow-text classes of tests/hostile.py to validate, runs and estimate, then the classes that
are about the request body itself (oversized, chunked, deep JSON, not UTF-8), with a small valid
workflow as the baseline. Peak memory is the kernel's high-water mark of the web process
(VmHWM), reset before each request (`/proc/<pid>/clear_refs` ← 5), less its RSS at that
moment. Goal for every class: answered in under 1 s, peak under +50 MB.

`--units N` (default 1,000,000; 0: skipped) then submits a workflow of one task of N units to a
service with its real Celery worker (a stack of its own), and reports the answer, the web
process's peak as above, and the worker's: the highest VmHWM above its RSS before, over the
worker's processes (the pool's children run the submission), until the submission keyed the
task's units (`unit-keys.txt` written) — then the run is cancelled. Goal: the worker within
+100 MB (a task may have SIMRUN_MAX_UNITS_PER_TASK units, a million by default).

The file and upload classes (links out of a run, bombs, archives of many members) are in
bench/api/hostile_files.py, and the client classes (200 stalled bodies, 200 open streams, one
identity's flood of 500 submissions) in bench/api/hostile_clients.py; both use this module's
service and measurement.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.local._stack import stack  # noqa: E402 - after sys.path
from runs.cli.service_commands import service_command  # noqa: E402
from tests.hostile import HOSTILE, deep_json  # noqa: E402

ROUTES = ("/api/validate/", "/api/runs/", "/api/estimate/")
VALID = "name: fine\ntasks:\n  - {id: a, type: sleep, settings: {units: 2}}\n"
GOAL_S, GOAL_MB = 1.0, 50.0
BASELINE = "valid workflow (baseline)"
# accepted by the reader (just under SIMRUN_WORKFLOW_MAX_NODES), so built and validated whole
AT_LIMIT = VALID.replace("units: 2}", "units: 2, extra: [" + ", ".join(["0"] * 19_900) + "]}")
MiB = 1024 * 1024


@dataclass(frozen=True)
class Case:
    """One request: what it is, where it goes, its body, whether it is chunked."""

    name: str
    route: str
    body: bytes
    chunked: bool = False
    elsewhere: str = ""  # being fixed by another change


def cases() -> list[Case]:
    """The valid baseline, every workflow-text class on every route, then the body classes."""
    out = [Case(BASELINE, route, _wrap(VALID)) for route in ROUTES]
    out += [Case("at the limits (19,900 values)", route, _wrap(AT_LIMIT)) for route in ROUTES]
    for name, hostile in HOSTILE.items():
        if name == "not_utf8":
            continue  # as a body it is the body class below
        out += [Case(name, route, _wrap(hostile.text.decode())) for route in ROUTES]
    body_item = "JSON error shape, 413, chunked and nested bodies (item 2)"
    out += [
        Case(
            "oversized body (3 MiB)",
            "/api/validate/",
            _wrap("name: big\n" + "#" * 3 * MiB),
            elsewhere=body_item,
        ),
        Case("chunked body", "/api/validate/", _wrap(VALID), chunked=True, elsewhere=body_item),
        Case(
            "deep JSON body (100k levels)",
            "/api/validate/",
            b'{"workflow": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            elsewhere=body_item,
        ),
        Case(
            "deep JSON object (100k levels)",
            "/api/validate/",
            b'{"workflow": ' + deep_json().encode() + b"}",
            elsewhere=body_item,
        ),
        Case(
            "body not UTF-8",
            "/api/validate/",
            b'{"workflow": "name: caf\xe9\\ntasks: []"}',
        ),
    ]
    return out


def _wrap(text: str) -> bytes:
    return json.dumps({"workflow": text}).encode()


@dataclass
class Answer:
    status: int
    code: str
    seconds: float
    peak_mb: float


def send(http: httpx.Client, pid: int, case: Case, token: str) -> Answer:
    """One request; its answer, wall time and the web process's peak above its RSS before."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = _status_kb(pid)["VmRSS"]
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    content: bytes | Iterator[bytes] = case.body
    if case.chunked:
        content = iter([case.body[i : i + 4096] for i in range(0, len(case.body), 4096)])
    start = time.perf_counter()
    response = http.post(case.route, content=content, headers=headers)
    seconds = time.perf_counter() - start
    peak = _status_kb(pid)["VmHWM"]
    try:
        body = response.json()
        code = str(body.get("code", "")) if isinstance(body, dict) else "estimate"
        if isinstance(body, dict) and "valid" in body:
            code = "valid" if body["valid"] else "valid: false"
    except ValueError:
        code = f"not JSON ({response.headers.get('content-type', '?').split(';')[0]})"
    return Answer(response.status_code, code, seconds, max(0.0, (peak - before) / 1024))


def _status_kb(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


@contextmanager
def served(env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """The web process as the service starts it (uvicorn, its protocol) on the stack's
    database, in its own process: its URL and pid."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = service_command("web", port=port)  # the protocol's deadlines and limits too
    server = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the service did not start") from None
                time.sleep(0.2)
        yield base, server.pid
    finally:
        server.terminate()
        server.wait(timeout=30)


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants of Celery (its pool): not plugin hosts (processes of the
    model's environment, with limits of their own) nor the pods it started."""
    import psutil

    root = psutil.Process(pid)
    found = [root.pid]
    for child in root.children(recursive=True):
        try:
            if "celery" in " ".join(child.cmdline()):  # not a plugin host, not a pod
                found.append(child.pid)
        except psutil.Error:
            continue
    return found


def many_units(units: int) -> str:
    """The million-unit class: a task of `units` units submitted to a service with its real
    Celery worker; the line of the benchmarks' table."""
    extra = {"SIMRUN_RATE_LIMIT_PER_MINUTE": "1000000", "SIMRUN_LOG_LEVEL": "ERROR"}
    with stack(services=True, extra_env=extra) as the_stack:
        from runs.models import Run, Task
        from runs.services.identities import create_identity, create_token

        paul = create_identity(name="paula", kind="person", password="bench-pw-123")
        token = create_token(identity=paul).secret
        env = {**the_stack.env, "SIMRUN_REDIS_URL": the_stack.env["CELERY_BROKER_URL"]}
        headers = {"Authorization": f"Bearer {token}"}
        worker = the_stack.procs["worker"].pid

        def submitted_and_keyed(n: int) -> tuple[Answer, str]:
            workflow = {
                "name": "wide",
                "tasks": [{"id": "many", "type": "sleep", "settings": {"units": n, "seconds": 0}}],
            }
            answer = send(
                http,
                pid,
                Case("wide", "/api/runs/", json.dumps({"workflow": workflow}).encode()),
                token,
            )
            run = Run.objects.order_by("-created_at").first()
            assert run is not None, answer
            deadline = time.monotonic() + 900
            while not Task.objects.filter(run=run).exclude(key="").exists():
                run.refresh_from_db()
                if run.state != "submitting" or time.monotonic() > deadline:
                    raise SystemExit(f"run {run.pk} was not keyed: {run.state} {run.message}")
                time.sleep(0.2)
            http.post(f"/api/runs/{run.pk}/cancel/", headers=headers)
            return answer, run.pk

        with served(env) as (url, pid), httpx.Client(base_url=url, timeout=900) as http:
            submitted_and_keyed(10)  # warm: the worker's imports, its pool, a plugin host
            before = {p: _status_kb(p)["VmRSS"] for p in _tree(worker)}
            for p in before:
                Path(f"/proc/{p}/clear_refs").write_text("5")
            started = time.perf_counter()
            answer, _ = submitted_and_keyed(units)
            keyed_s = time.perf_counter() - started
            peaks = {
                p: _status_kb(p)["VmHWM"] - rss
                for p, rss in before.items()
                if Path(f"/proc/{p}").exists()
            }
    worker_mb = max(peaks.values()) / 1024
    met = "met" if worker_mb <= 100 and answer.seconds < GOAL_S else "**missed**"
    return (
        f"| a task of {units:,} units | `/api/runs/` | {answer.status} "
        f"| {answer.seconds * 1000:.0f} ms (keyed by the worker in {keyed_s:.1f} s) "
        f"| web +{answer.peak_mb:.1f} MB, Celery worker +{worker_mb:.1f} MB "
        f"| {met} (worker ≤ +100 MB) |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="requests per case (0: none)")
    parser.add_argument(
        "--units", type=int, default=1_000_000, help="units of the many-units class (0: none)"
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="then the file and client classes (hostile_files.py, hostile_clients.py)",
    )
    args = parser.parse_args()
    measure(args)
    for module in ("hostile_files.py", "hostile_clients.py") if args.all else ():
        subprocess.run([sys.executable, str(Path(__file__).with_name(module))], check=True)
    return 0


def measure(args: argparse.Namespace) -> None:
    """The classes of this module: the many-units one, then every request class."""
    if args.units:
        line = many_units(args.units)
        print(line, flush=True)
    if args.repeat <= 0:  # the many-units class alone
        return
    extra = {"SIMRUN_RATE_LIMIT_PER_MINUTE": "1000000", "SIMRUN_LOG_LEVEL": "ERROR"}
    with stack(services=False, extra_env=extra) as the_stack:
        from runs.services.identities import create_identity, create_token

        paul = create_identity(name="paul", kind="person", password="bench-pw-123")
        token = create_token(identity=paul).secret
        env = {**the_stack.env, "SIMRUN_REDIS_URL": the_stack.env["CELERY_BROKER_URL"]}
        with served(env) as (url, pid), httpx.Client(base_url=url, timeout=300) as http:
            for _ in range(5):  # warm: imports, connections, the task types, the broker
                for route in ROUTES:
                    send(http, pid, Case("warm", route, _wrap(VALID)), token)
            rows = []
            for case in cases():
                answers = [send(http, pid, case, token) for _ in range(args.repeat)]
                rows.append((case, answers))
                print(_row(case, answers), flush=True)
    print()
    print(table(rows))


def _row(case: Case, answers: list[Answer]) -> str:
    first = answers[0]
    worst_s = max(a.seconds for a in answers)
    return (
        f"{case.name:32} {case.route:16} {first.status} {first.code:28} "
        f"median {statistics.median(a.seconds for a in answers) * 1000:8.1f} ms  "
        f"max {worst_s * 1000:8.1f} ms  peak +{max(a.peak_mb for a in answers):6.1f} MB"
    )


def table(rows: list[tuple[Case, list[Answer]]]) -> str:
    """The figures as the Markdown table of docs/benchmarks.md."""
    lines = [
        "| input | route | answer | median | max | peak RSS above baseline | goal |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for case, answers in rows:
        worst_s = max(a.seconds for a in answers)
        worst_mb = max(a.peak_mb for a in answers)
        met = "met" if worst_s < GOAL_S and worst_mb < GOAL_MB else "**missed**"
        if case.name == BASELINE:
            met = "(reference)"
        elif case.elsewhere:
            met += "; the answer's shape is being fixed (item 2)"
        first = answers[0]
        lines.append(
            f"| {case.name} | `{case.route}` | {first.status} {first.code} "
            f"| {statistics.median(a.seconds for a in answers) * 1000:.0f} ms "
            f"| {worst_s * 1000:.0f} ms | +{worst_mb:.1f} MB | {met} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

"""The file and upload classes of hostile input against a running service: runs whose files
are links out of the store, an output too large to list whole, and archives built to cost
the service (a sparse tar, a zip of many well-compressed members, 100,000 members).

    .venv/bin/python bench/api/hostile_files.py [--repeat 5]

The service, the measurement and the goals are bench/api/hostile.py's (uvicorn in its own
process on a throwaway database, peak RSS of the web process above its RSS before each
request, every class answered in under 1 s and under +50 MB); each class also checks that
its answer is JSON and holds no byte of what lies outside the store (the first line of
/etc/shadow, the web process's environment, a secret planted beside the store). The
references are a listing of a run of ten output files and a small valid upload, sent in the
same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.api.hostile import GOAL_MB, GOAL_S, _status_kb, served  # noqa: E402
from bench.local._stack import stack  # noqa: E402
from tests.api.archives import (  # noqa: E402
    many_members_tar,
    many_members_zip,
    sparse_tar,
    tar_files,
)

MIB = 1024 * 1024
LISTED_FILES = 150_000


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    route: str
    body: bytes = b""
    content_type: str = ""
    reference: bool = False


@dataclass
class Answer:
    status: int
    code: str
    seconds: float
    peak_mb: float
    leaked: list[str] = field(default_factory=list)


def plant(store: Path, outside: Path, runs: Callable[[str], str]) -> dict[str, str]:
    """The runs of the classes, their files written as a hostile run's code leaves them:
    {"links": .., "many": .., "fine": ..} → run id."""
    made = {name: runs(name) for name in ("links", "many", "fine")}
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret_key").write_text("planted-secret-beside-the-store\n")

    def task_dir(run: str) -> Path:
        return store / "runs" / run / "tasks" / "hello"

    links = task_dir(made["links"])
    links.mkdir(parents=True)
    (links / "out").symlink_to("/")
    (links / "logs").mkdir()
    (links / "logs" / "hello-0.log").symlink_to("/etc/shadow")
    (links / "logs" / "hello-1.log").symlink_to("/proc/self/environ")
    (links / "logs" / "hello-2.log").symlink_to(outside / "secret_key")
    many = task_dir(made["many"]) / "out"
    many.mkdir(parents=True)
    for i in range(LISTED_FILES):
        (many / f"f{i:06d}").touch()
    fine = task_dir(made["fine"]) / "out"
    fine.mkdir(parents=True)
    for i in range(10):
        (fine / f"part-{i}.csv").write_text("a,b\n1,2\n")
    return made


def cases(made: dict[str, str], data_dir: Path) -> list[Case]:
    links, many, fine = made["links"], made["many"], made["fine"]
    below_root = os.path.relpath(data_dir, "/")
    out = f"runs/{links}/tasks/hello/out"
    return [
        Case(
            "outputs of 10 files (reference)", "GET", f"/api/runs/{fine}/outputs/", reference=True
        ),
        Case("outputs: out/ a link to /", "GET", f"/api/runs/{links}/outputs/"),
        Case(
            "download through out/ → / (secret key)",
            "GET",
            f"/api/runs/{links}/outputs/download/?path={out}/{below_root}/secret_key",
        ),
        Case(
            "download through out/ → / (/etc/shadow)",
            "GET",
            f"/api/runs/{links}/outputs/download/?path={out}/etc/shadow",
        ),
        Case(
            "logs linked to shadow, environ, a secret", "GET", f"/api/runs/{links}/logs/?task=hello"
        ),
        Case(
            "the same logs followed",
            "GET",
            f"/api/runs/{links}/logs/?task=hello&follow=true",
        ),
        Case(f"outputs of {LISTED_FILES:,} files", "GET", f"/api/runs/{many}/outputs/"),
        Case(
            "small valid upload (reference)",
            "POST",
            "/api/snapshots/?name=fine",
            tar_files({"model/model.txt": b"hello\n"}),
            "application/x-tar",
            reference=True,
        ),
        Case(
            "sparse tar (10 KiB for 1 GiB)",
            "POST",
            "/api/snapshots/?name=sparse",
            sparse_tar(1024**3),
            "application/x-tar",
        ),
        Case(
            "zip of 256 members of 1 MiB (291 KB)",
            "POST",
            "/api/snapshots/?name=zip",
            many_members_zip(256, MIB),
            "application/zip",
        ),
        Case(
            "zip of 100,000 members",
            "POST",
            "/api/snapshots/?name=members",
            many_members_zip(100_000, 16),
            "application/zip",
        ),
        Case(
            "tar.gz of 100,000 members",
            "POST",
            "/api/snapshots/?name=members",
            _gzip(many_members_tar(100_000)),
            "application/gzip",
        ),
    ]


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data, compresslevel=6)


def forbidden(data_dir: Path, outside: Path) -> dict[str, bytes]:
    """What no answer may hold: bytes only files outside the store have."""
    found = {
        "planted secret": (outside / "secret_key").read_bytes().strip(),
        "environment": b"SIMRUN_STORE=",
    }
    if (data_dir / "secret_key").exists():
        found["secret key"] = (data_dir / "secret_key").read_bytes().strip()
    if Path("/etc/shadow").exists():
        found["/etc/shadow"] = Path("/etc/shadow").read_bytes().split(b"\n")[0]
    return {name: value for name, value in found.items() if value}


def send(http: httpx.Client, pid: int, case: Case, token: str, secrets: dict[str, bytes]) -> Answer:
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = _status_kb(pid)["VmRSS"]
    headers = {"Authorization": f"Bearer {token}"}
    if case.content_type:
        headers["Content-Type"] = case.content_type
    start = time.perf_counter()
    response = http.request(case.method, case.route, content=case.body or None, headers=headers)
    seconds = time.perf_counter() - start
    peak = _status_kb(pid)["VmHWM"]
    kind = response.headers.get("content-type", "?").split(";")[0]
    if kind == "application/json":
        body = response.json()
        code = str(body.get("code", "")) if isinstance(body, dict) else f"{len(body)} entries"
        if isinstance(body, dict) and isinstance(body.get("files"), list):
            code = f"{len(body['files'])} files, cut: {body.get('cut')}"
    else:
        code = f"{kind}, {len(response.content)} bytes"
    leaked = [name for name, value in secrets.items() if value in response.content]
    return Answer(response.status_code, code, seconds, max(0.0, (peak - before) / 1024), leaked)


def table(rows: list[tuple[Case, list[Answer]]]) -> str:
    lines = [
        "| input | answer | median | max | peak RSS above baseline | nothing from outside | goal |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for case, answers in rows:
        worst_s = max(a.seconds for a in answers)
        worst_mb = max(a.peak_mb for a in answers)
        leaked = sorted({name for a in answers for name in a.leaked})
        met = worst_s < GOAL_S and worst_mb < GOAL_MB and not leaked
        first = answers[0]
        lines.append(
            f"| {case.name} | {first.status} {first.code} "
            f"| {statistics.median(a.seconds for a in answers) * 1000:.0f} ms "
            f"| {worst_s * 1000:.0f} ms | +{worst_mb:.1f} MB "
            f"| {'**' + ', '.join(leaked) + '**' if leaked else 'yes'} "
            f"| {'(reference)' if case.reference else 'met' if met else '**missed**'} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="requests per case")
    args = parser.parse_args()
    extra = {"SIMRUN_RATE_LIMIT_PER_MINUTE": "1000000", "SIMRUN_LOG_LEVEL": "ERROR"}
    with stack(services=False, extra_env=extra) as the_stack:
        from runs.services.identities import create_identity, create_token
        from tests import factories

        paul = create_identity(name="paul", kind="person", password="bench-pw-123")
        token = create_token(identity=paul).secret
        outside = the_stack.tmp / "outside"
        started = time.perf_counter()
        made = plant(
            the_stack.store,
            outside,
            lambda name: factories.run(by=paul, state="succeeded").pk,
        )
        print(f"planted in {time.perf_counter() - started:.1f} s", flush=True)
        data_dir = Path(the_stack.env["SIMRUN_DATA_DIR"])
        env = {**the_stack.env, "SIMRUN_REDIS_URL": the_stack.env["CELERY_BROKER_URL"]}
        with served(env) as (url, pid), httpx.Client(base_url=url, timeout=300) as http:
            secrets = forbidden(data_dir, outside)
            the_cases = cases(made, data_dir)
            for case in the_cases[:1] * 5:  # warm: imports, connections
                send(http, pid, case, token, secrets)
            rows = []
            for case in the_cases:
                answers = [send(http, pid, case, token, secrets) for _ in range(args.repeat)]
                rows.append((case, answers))
                print(
                    f"{case.name:42} {answers[0].status} {answers[0].code:34} "
                    f"max {max(a.seconds for a in answers) * 1000:7.1f} ms "
                    f"peak +{max(a.peak_mb for a in answers):5.1f} MB "
                    f"leaked {sorted({n for a in answers for n in a.leaked}) or 'nothing'}",
                    flush=True,
                )
    print()
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

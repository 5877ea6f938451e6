"""The client classes of hostile input against a running service: stalled request bodies,
open event streams, stalled downloads, and one identity's flood of submissions.

    flock /tmp/simrun-bench.lock nice -n 5 .venv/bin/python bench/api/hostile_clients.py \
        [--only stalled|streams|downloads|flood] [--downloads 50] [--scale 0.1]

The service and its measurement are bench/api/hostile.py's (the web process as the service
starts it, on a throwaway database). Each class measures what other clients get while it
lasts against the same requests with nothing hostile open, in the same run:

- **stalled bodies**: 200 connections (half `POST /login/` without a credential, half
  `POST /api/validate/` with a token) each announce a body of 1,000 bytes, send 13 and stop;
  one answered at the body deadline (408) is replaced at once, so 200 stay stalled for at
  least 12 s. Others' requests (the login page, a run list, a validation) are timed: p50 and
  p99 beside the same requests before the stall.
- **open streams**: 200 event streams of a running run held by ten identities (20 each, the
  default SIMRUN_STREAMS_PER_IDENTITY), and one more of one of them (429 expected). The web
  process's threads and file descriptors, and others' requests timed, against before.
- **stalled downloads**: a finished run with an output of 64 MB of random bytes; 50
  connections (`--downloads`) each `GET /api/runs/<id>/outputs/download/?path=...` with a
  token, with a receive buffer of 4 KiB, and read nothing past the answer's head. The time to
  each head, the web process's threads and descriptors, others' requests timed against before,
  and how many downloads are still open (not cut) at the end; all well within
  SIMRUN_SEND_TIMEOUT_S (60 s by default), after which a client taking nothing is cut.
- **flood**: with the real Celery worker and watcher, one agent sends 500 submissions as fast
  as eight connections allow; then another person submits one run. The time from that
  person's POST until a worker submitted the run (its state left `submitting`), beside the
  same submission with no flood, in the same run; the flood's answers (201, 429 with
  Retry-After) and their times.

Goals (docs/benchmarks.md): every hostile request answered in under 1 s with a JSON error;
others' p50 under 100 ms and p99 under 1 s; the web process's threads about the same with 200
streams open or 50 downloads stalled, its peak within +50 MB; the other person's submission
delayed by a few seconds at most.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import socket
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.api.hostile import _status_kb, served  # noqa: E402
from bench.local._stack import stack  # noqa: E402

STALLED = 200
STREAMS_EACH, STREAM_IDENTITIES = 20, 10
FLOOD, FLOOD_CONNECTIONS = 500, 8
DOWNLOADS, DOWNLOAD_MIB, DOWNLOAD_NAME = 50, 64, "big.bin"
ROUNDS = 40  # of the three requests of others, per measurement
HELD_S = 12.0  # stalled bodies held at least this long: past two body deadlines (5 s)
WORKFLOW = {"name": "small", "tasks": [{"id": "a", "type": "sleep", "settings": {"units": 1}}]}
MIB = 1024 * 1024
HEAD = "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n{more}\r\n"


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def others(http: httpx.Client, token: str, rounds: int = ROUNDS) -> list[float]:
    """Seconds of others' requests: the login page, a run list and a validation, `rounds`
    times each; any answer but the expected one stops the benchmark."""
    auth = {"Authorization": f"Bearer {token}"}
    times = []
    for _ in range(rounds):
        for method, path, body in (
            ("GET", "/login/", None),
            ("GET", "/api/runs/", None),
            ("POST", "/api/validate/", {"workflow": WORKFLOW}),
        ):
            start = time.perf_counter()
            answer = http.request(
                method, path, json=body, headers=auth if body or "api" in path else {}
            )
            times.append(time.perf_counter() - start)
            if answer.status_code != 200:
                raise SystemExit(f"{method} {path}: {answer.status_code} {answer.text[:200]}")
    return times


def latency(times: list[float]) -> str:
    return f"p50 {quantile(times, 0.5) * 1000:.0f} ms, p99 {quantile(times, 0.99) * 1000:.0f} ms"


@contextmanager
def peak(pid: int) -> Iterator[list[float]]:
    """The web process's peak RSS during the block above its RSS before, in MB (set at the
    end into the list yielded): the kernel's high-water mark, reset at the start."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = _status_kb(pid)["VmRSS"]
    found: list[float] = []
    yield found
    found.append((_status_kb(pid)["VmHWM"] - before) / 1024)


def raw(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


@dataclass
class Stallers:
    """`n` stalled bodies kept open: an answered or closed one is replaced by a new one."""

    address: tuple[str, int]
    token: str
    n: int
    answers: Counter[str] = field(default_factory=Counter)
    opened: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def _open(self, sel: selectors.BaseSelector, anonymous: bool) -> None:
        conn = socket.create_connection(self.address, timeout=10)
        if anonymous:
            head = HEAD.format(path="/login/", more="")
        else:
            more = f"Authorization: Bearer {self.token}\r\nContent-Type: application/json\r\n"
            head = HEAD.format(path="/api/validate/", more=more)
        conn.sendall(head.encode() + b"workflow=a&b=")
        conn.setblocking(False)
        sel.register(conn, selectors.EVENT_READ, anonymous)
        self.opened += 1

    def _answered(self, conn: socket.socket) -> str:
        try:
            data = conn.recv(65536)
        except OSError:
            return "reset"
        if not data:
            return "closed"
        status = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else "?"
        shape = "JSON" if b"application/json" in data.lower() else "not JSON"
        return f"{status} {shape}"

    def run(self) -> None:
        sel = selectors.DefaultSelector()
        for i in range(self.n):
            self._open(sel, anonymous=bool(i % 2))
        while not self._stop.is_set():
            for key, _ in sel.select(timeout=0.2):
                conn = key.fileobj
                assert isinstance(conn, socket.socket)
                self.answers[self._answered(conn)] += 1
                sel.unregister(conn)
                conn.close()
                self._open(sel, anonymous=key.data)
        for key in list(sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]

    @contextmanager
    def held(self) -> Iterator[Stallers]:
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        try:
            while self.opened < self.n:
                time.sleep(0.05)
            yield self
        finally:
            self._stop.set()
            thread.join(timeout=30)


def stalled_bodies(url: str, pid: int, token: str) -> list[str]:
    """The stalled-bodies class: others' latency before and with 200 stalled bodies."""
    with httpx.Client(base_url=url, timeout=60) as http:
        others(http, token, rounds=5)  # warm
        before = others(http, token)
        with peak(pid) as mb, Stallers(raw(url), token, STALLED).held() as stallers:
            during: list[float] = []
            started = time.perf_counter()
            while time.perf_counter() - started < HELD_S:  # past the deadline: replaced ones
                during += others(http, token)
            threads = len(os.listdir(f"/proc/{pid}/task"))
        answers = ", ".join(f"{n} x {what}" for what, n in stallers.answers.most_common())
    return [
        f"stalled bodies: nothing stalled: {latency(before)}",
        f"stalled bodies: {STALLED} stalled ({stallers.opened} opened in all, {answers}; "
        f"{threads} threads in the web process, +{mb[0]:.1f} MB): {latency(during)}",
    ]


def open_stream(
    address: tuple[str, int], token: str, path: str
) -> tuple[int, bytes, socket.socket]:
    """A stream's status and first bytes; its connection left open (nothing read further)."""
    conn = socket.create_connection(address, timeout=30)
    head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n"
    conn.sendall(head.encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1]), data, conn


def web_counts(pid: int) -> str:
    threads = len(os.listdir(f"/proc/{pid}/task"))
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return f"{threads} threads, {fds} descriptors"


def open_streams(url: str, pid: int, tokens: list[str], run_id: str) -> list[str]:
    """The streams class: threads, descriptors and others' latency before and with 200 open
    streams, and the answer to one more stream of an identity holding its limit."""
    address, path = raw(url), f"/api/runs/{run_id}/events/"
    with httpx.Client(base_url=url, timeout=60) as http, ExitStack() as held:
        others(http, tokens[0], rounds=5)  # warm
        before, counts_before = others(http, tokens[0]), web_counts(pid)
        mb = held.enter_context(peak(pid))
        opening = time.perf_counter()
        for n in range(STREAMS_EACH * STREAM_IDENTITIES):
            status, data, conn = open_stream(address, tokens[n % STREAM_IDENTITIES], path)
            held.callback(conn.close)
            if status != 200:
                raise SystemExit(f"stream {n}: {status} {data[-300:]!r}")
        opened_s = time.perf_counter() - opening
        start = time.perf_counter()
        status, data, conn = open_stream(address, tokens[0], path)
        one_more_s = time.perf_counter() - start
        held.callback(conn.close)
        shape = "JSON" if b"application/json" in data.lower() else "not JSON"
        counts_during = web_counts(pid)
        during = others(http, tokens[0])
        held.close()  # the streams closed, the peak read
    return [
        f"streams: none open: {counts_before}; others {latency(before)}",
        f"streams: {STREAMS_EACH * STREAM_IDENTITIES} open (opened in {opened_s:.1f} s): "
        f"{counts_during}, +{mb[0]:.1f} MB; others {latency(during)}",
        f"streams: one more of an identity holding {STREAMS_EACH}: {status} {shape} "
        f"in {one_more_s * 1000:.0f} ms",
    ]


def stalled_download(
    address: tuple[str, int], token: str, path: str
) -> tuple[int, float, socket.socket]:
    """A download's status and the seconds to its head; its connection left open with a
    receive buffer of 4 KiB, nothing read past the head (the rest only peeked at)."""
    conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    conn.settimeout(30)
    start = time.perf_counter()
    conn.connect(address)
    head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n"
    conn.sendall(head.encode())
    deadline = start + 30
    while True:
        seen = conn.recv(65536, socket.MSG_PEEK)
        end = seen.find(b"\r\n\r\n")
        if end >= 0 or not seen or time.perf_counter() > deadline:
            break
        time.sleep(0.001)  # more of the head on its way (a peek returns what is there)
    seconds = time.perf_counter() - start
    if end < 0:
        raise SystemExit(f"download closed before its head: {seen[-300:]!r}")
    data = conn.recv(end + 4)  # the head, and nothing of the body
    return int(data.split(b" ", 2)[1]), seconds, conn


def still_open(conn: socket.socket) -> bool:
    """Whether a stalled download's connection is still open (not cut by the service)."""
    try:
        return bool(conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return True  # open, nothing waiting
    except OSError:
        return False


def big_output(by_name: str) -> tuple[str, str]:
    """A finished run of `by_name` with an output of DOWNLOAD_MIB random bytes, as a run's
    output lies in the store; the run's id and the output's path for the download."""
    from runs.models import Identity
    from runs.store import task_paths
    from tests.runs.crates.scenes import finished_scan

    run = finished_scan(by=Identity.objects.get(name=by_name))
    with (task_paths(run.pk, "scan").out / DOWNLOAD_NAME).open("wb") as out:
        for _ in range(DOWNLOAD_MIB):
            out.write(os.urandom(1024 * 1024))
    return run.pk, f"runs/{run.pk}/tasks/scan/out/{DOWNLOAD_NAME}"


def stalled_downloads(url: str, pid: int, token: str, run_id: str, output: str) -> list[str]:
    """The stalled-downloads class: threads, descriptors and others' latency before and with
    DOWNLOADS downloads of a large output that nobody reads past the head."""
    address = raw(url)
    path = f"/api/runs/{run_id}/outputs/download/?path={output}"
    with httpx.Client(base_url=url, timeout=60) as http, ExitStack() as held:
        whole = http.get(path, headers={"Authorization": f"Bearer {token}"})  # warm, and whole
        if whole.status_code != 200 or len(whole.content) != DOWNLOAD_MIB * MIB:
            raise SystemExit(f"the download: {whole.status_code} {len(whole.content)} bytes")
        others(http, token, rounds=5)  # warm
        before, counts_before = others(http, token), web_counts(pid)
        mb = held.enter_context(peak(pid))
        opening = time.perf_counter()
        conns, heads = [], []
        for n in range(DOWNLOADS):
            status, seconds, conn = stalled_download(address, token, path)
            held.callback(conn.close)
            if status != 200:
                raise SystemExit(f"download {n}: {status}")
            conns.append(conn)
            heads.append(seconds)
        opened_s = time.perf_counter() - opening
        counts_during = web_counts(pid)
        during = others(http, token)
        held_s = time.perf_counter() - opening
        still = sum(still_open(conn) for conn in conns)
        held.close()  # the downloads closed, the peak read
    return [
        f"downloads: none stalled: {counts_before}; others {latency(before)}",
        f"downloads: {DOWNLOADS} stalled of {DOWNLOAD_MIB} MB (opened in {opened_s:.1f} s, "
        f"{DOWNLOADS} x 200, head in max {max(heads) * 1000:.0f} ms; {still} still open after "
        f"{held_s:.1f} s): {counts_during}, +{mb[0]:.1f} MB; others {latency(during)}",
    ]


def submitted_after(http: httpx.Client, token: str) -> float:
    """Seconds from a submission's POST until a worker submitted its run."""
    from runs.models import Run

    start = time.perf_counter()
    answer = http.post(
        "/api/runs/", json={"workflow": WORKFLOW}, headers={"Authorization": f"Bearer {token}"}
    )
    if answer.status_code != 201:
        raise SystemExit(f"the other person's submission: {answer.status_code} {answer.text}")
    run_id = answer.json()["id"]
    deadline = start + 900
    while Run.objects.filter(pk=run_id, state="submitting").exists():
        if time.perf_counter() > deadline:
            raise SystemExit(f"run {run_id} still in submission after 900 s")
        time.sleep(0.05)
    return time.perf_counter() - start


def flood(url: str, pid: int, flooder: str, other: str) -> list[str]:
    """The flood class: the other person's submission before and after one agent's 500."""
    with httpx.Client(base_url=url, timeout=120) as http:
        alone = [submitted_after(http, other) for _ in range(3)]

        def one(_: int) -> tuple[int, bool, float]:
            start = time.perf_counter()
            answer = http.post(
                "/api/runs/",
                json={"workflow": WORKFLOW},
                headers={"Authorization": f"Bearer {flooder}"},
            )
            retry = "retry-after" in answer.headers and _json(answer)
            return answer.status_code, bool(retry), time.perf_counter() - start

        started = time.perf_counter()
        with peak(pid) as mb, ThreadPoolExecutor(FLOOD_CONNECTIONS) as pool:
            sent = list(pool.map(one, range(FLOOD)))
        flood_s = time.perf_counter() - started
        after = submitted_after(http, other)
    statuses = Counter(status for status, _, _ in sent)
    with_retry = sum(1 for status, retry, _ in sent if status == 429 and retry)
    times = [s for _, _, s in sent]
    return [
        f"flood: {FLOOD} submissions of one agent in {flood_s:.1f} s: "
        + ", ".join(f"{n} x {s}" for s, n in sorted(statuses.items()))
        + f" ({with_retry} of the 429s in JSON with Retry-After); answers {latency(times)}, "
        f"max {max(times) * 1000:.0f} ms; web +{mb[0]:.1f} MB",
        f"flood: the other person's submission to submitted, alone: "
        f"{', '.join(f'{s:.2f} s' for s in alone)} (median {statistics.median(alone):.2f} s)",
        f"flood: the same right after the flood: {after:.2f} s",
    ]


def _json(answer: httpx.Response) -> bool:
    try:
        return isinstance(answer.json(), dict)
    except json.JSONDecodeError:
        return False


def people(n: int, kind: str = "person", acts_for: str | None = None) -> list[str]:
    """`n` identities and a token of each."""
    from runs.services.identities import create_identity, create_token

    tokens = []
    for i in range(n):
        password = None if acts_for else f"bench-pw-{i}-123"
        made = create_identity(name=f"{kind}{i}", kind=kind, acts_for=acts_for, password=password)
        tokens.append(create_token(identity=made).secret)
    return tokens


def flood_identities() -> tuple[str, str]:
    """The flooding agent's token (acting for one person) and another person's."""
    other, _agents_person = people(2)
    return people(1, "agent", acts_for="person1")[0], other


def with_service(services: bool, measure: Callable[[str, int], list[str]]) -> list[str]:
    extra = {
        "SIMRUN_RATE_LIMIT_PER_MINUTE": "1000000",
        "SIMRUN_LOG_LEVEL": "ERROR",
        "SIMRUN_STREAMS_PER_IDENTITY": str(STREAMS_EACH),  # the default (20) at full scale
    }
    with stack(services=services, extra_env=extra) as the_stack:
        env = {**the_stack.env, "SIMRUN_REDIS_URL": the_stack.env["CELERY_BROKER_URL"]}
        with served(env) as (url, pid):
            return measure(url, pid)


def main() -> int:
    global STALLED, STREAMS_EACH, FLOOD, ROUNDS, DOWNLOADS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--only", choices=("stalled", "streams", "downloads", "flood"), action="append"
    )
    parser.add_argument(
        "--downloads", type=int, default=DOWNLOADS, help="stalled downloads (default 50)"
    )
    parser.add_argument("--scale", type=float, default=1.0, help="of every count (a try: 0.1)")
    args = parser.parse_args()
    STALLED, FLOOD = int(STALLED * args.scale), int(FLOOD * args.scale)
    STREAMS_EACH, ROUNDS = max(2, int(STREAMS_EACH * args.scale)), max(5, int(ROUNDS * args.scale))
    DOWNLOADS = max(1, int(args.downloads * args.scale))
    chosen = args.only or ["stalled", "streams", "downloads", "flood"]
    lines: list[str] = []
    if "stalled" in chosen:
        lines += with_service(False, lambda url, pid: stalled_bodies(url, pid, people(1)[0]))
        print(*lines, sep="\n", flush=True)
    if "streams" in chosen:

        def streams(url: str, pid: int) -> list[str]:
            from runs.models import Identity
            from tests.api.scenes import split_run

            tokens = people(STREAM_IDENTITIES)
            owner = Identity.objects.get(name="person0")
            run = split_run(by=owner, units=4, state="running", version=1)
            return open_streams(url, pid, tokens, run.pk)

        found = with_service(False, streams)
        print(*found, sep="\n", flush=True)
        lines += found
    if "downloads" in chosen:

        def downloads(url: str, pid: int) -> list[str]:
            token = people(1)[0]
            return stalled_downloads(url, pid, token, *big_output("person0"))

        found = with_service(False, downloads)
        print(*found, sep="\n", flush=True)
        lines += found
    if "flood" in chosen:
        found = with_service(True, lambda url, pid: flood(url, pid, *flood_identities()))
        print(*found, sep="\n", flush=True)
        lines += found
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`simrun watch|serve|demo`: the processes of the embedded default, and the main job."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from runs.cli.base import setup_django

log = logging.getLogger("simrun.watch")
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_WORKFLOW = ROOT / "examples" / "workflows" / "repressilator.yaml"
EXAMPLE_MODEL = ROOT / "examples" / "models" / "repressilator"
POD_STOP_MARGIN_S = 10.0  # a pod's supervisor gets the pod's grace and this to end it


def port_number(text: str) -> int:
    """A TCP port from `--port` or SIMRUN_PORT (argparse parses a string default the same
    way), or the one-line error that names both and what is allowed."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a port (--port or SIMRUN_PORT: a whole number from 1 to 65535)"
        )
    return port


def register(sub: Any) -> None:
    from runs.cli import status_commands

    status_commands.register(sub)
    p = sub.add_parser("watch", help="the controller loop: reconcile on every change of a run")
    p.set_defaults(handler=watch)
    p = sub.add_parser("serve", help="run web, Celery worker, Celery beat and the watcher")
    p.add_argument("--port", type=port_number, default=os.environ.get("SIMRUN_PORT", "8000"))
    p.set_defaults(handler=serve)
    p = sub.add_parser("demo", help="the main job: run the example workflow on this machine")
    p.add_argument("--keep", action="store_true", help="leave the services running at the end")
    p.add_argument("--port", type=port_number, default=os.environ.get("SIMRUN_PORT", "8000"))
    p.add_argument("--workflow", type=Path, default=EXAMPLE_WORKFLOW)
    p.add_argument("--source", type=Path, default=EXAMPLE_MODEL)
    p.set_defaults(handler=demo)


def watch(args: argparse.Namespace) -> int:
    """Reconcile whenever the backend reports a change, and at least every poll interval."""
    setup_django()
    from runs.controller.watcher import watch as watching

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    watching()
    return 0


def serve_port(preferred: int) -> int:
    """`preferred` if the web server can bind it, else a free port. Bound as uvicorn binds
    (SO_REUSEADDR), so connections of an earlier serve waiting out TIME_WAIT on it do not
    count as taking it; a process listening on it does."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])


def service_command(
    kind: str, *, port: int = 8000, name: str | None = None, beat_schedule: Path | None = None
) -> list[str]:
    """The command line of one service process: `web`, `worker`, `beat` (its schedule in
    `beat_schedule`) or `watcher`. Tests and benchmarks start the same processes with it."""
    bin_dir = Path(sys.executable).parent
    if kind == "web":
        return [
            str(bin_dir / "uvicorn"),
            "simrun_site.asgi:application",
            "--http",
            "simrun_site.web_protocol:WebProtocol",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ]
    if kind == "worker":
        command = [
            str(bin_dir / "celery"),
            "-A",
            "simrun_site",
            "worker",
            "--concurrency",
            "2",
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
        ]
        if name:
            command += ["-n", name]
        return command
    if kind == "beat":
        command = [str(bin_dir / "celery"), "-A", "simrun_site", "beat", "--loglevel", "WARNING"]
        if beat_schedule is not None:
            command += ["--schedule", str(beat_schedule)]
        return command
    if kind == "watcher":
        return [sys.executable, str(ROOT / "manage.py"), "simrun", "watch"]
    raise ValueError(f"unknown service process {kind!r} (web, worker, beat, watcher)")


def service_commands(*, port: int, data_dir: Path) -> dict[str, list[str]]:
    """The four services of the embedded default: web, a Celery worker, Celery beat (a
    process of its own, which serve restarts like the others: inside the worker, `-B`, a
    dead beat went unnoticed) and the watcher."""
    return {
        "web": service_command("web", port=port),
        "worker": service_command("worker"),
        "beat": service_command("beat", beat_schedule=data_dir / "celerybeat-schedule"),
        "watcher": service_command("watcher"),
    }


def stop_services(procs: dict[str, subprocess.Popen[bytes]], *, grace: float = 20.0) -> None:
    """SIGTERM to each service's main process, which stops its own children (a Celery worker
    its pool and beat: a SIGTERM to its whole group makes it respawn the pool while it shuts
    down); what is left of a group after the grace is killed."""
    for proc in procs.values():
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + grace
    for name, proc in procs.items():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("the %s process did not stop within %.0fs: killed", name, grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def serve(args: argparse.Namespace) -> int:
    """Set up (the database migrated, the machine's token, what is left of an earlier serve
    ended), then become the supervisor of the services until SIGTERM or Ctrl-C: the same
    process, without Django (`runs/cli/supervise.py`; docs/local-backend.md)."""
    setup_django()
    from django.conf import settings
    from django.core.management import call_command

    from runs.cli.handover import ServePlan, hand_over
    from runs.cli.identity_commands import login_link_line
    from runs.cli.service_state import read_token, write_token
    from runs.cli.serving import take_over
    from runs.selectors.disk import installation_paths, min_free_bytes
    from runs.services.identities import machine_token, owner_identity

    call_command("migrate", verbosity=0)
    data_dir = Path(settings.DATA_DIR).absolute()
    # the commands of this machine reach the service with it, without setting Django up
    kept = read_token(data_dir)
    secret = machine_token(identity=owner_identity(), secret=kept)
    if secret != kept:
        write_token(data_dir, secret)
    take_over(data_dir)
    clean_broker()
    port = serve_port(args.port)
    hand_over(
        ServePlan(
            data_dir=str(data_dir),
            store=str(Path(settings.SIMRUN_STORE).absolute()),
            port=port,
            pods_grace_s=float(settings.SIMRUN_GRACE_S) + POD_STOP_MARGIN_S,
            restart_burst=settings.SIMRUN_RESTART_BURST,
            restart_window_s=settings.SIMRUN_RESTART_WINDOW_S,
            deadline_s=settings.SIMRUN_LIVENESS_S,
            disks=[str(path) for path in installation_paths()],
            min_free=min_free_bytes(),
            log_max_bytes=settings.SIMRUN_LOG_MAX_BYTES,
            log_backups=settings.SIMRUN_LOG_BACKUPS,
            fork=settings.SIMRUN_FORK_SERVICES,
            login_line=login_link_line(data_dir, f"http://127.0.0.1:{port}/"),
        )
    )


def clean_broker() -> None:
    """What producers killed half way left in the file broker's staging and control folders,
    and the doorbells of consumers that died."""
    from django.conf import settings

    from simrun_site.broker_doorbell import clean_doorbells
    from simrun_site.file_broker import clean_control, clean_staging

    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {})
    for option, clean in (
        ("staging_folder", clean_staging),
        ("control_folder", clean_control),
        ("doorbell_folder", clean_doorbells),
    ):
        if folder := options.get(option):
            clean(Path(str(folder)))


def demo(args: argparse.Namespace) -> int:
    """Install → start the embedded default → submit the example → follow → report."""
    setup_django()
    from django.conf import settings
    from django.core.management import call_command

    from runs.cli.client import Client
    from runs.cli.identity_commands import login_link_line
    from runs.cli.run_commands import follow_run, output_paths
    from runs.cli.service_state import read_token
    from runs.cli.serving import Background, Joined
    from runs.cli.summary import print_summary, summary_lines

    print("simrun demo: preparing the database and the store", flush=True)
    call_command("migrate", verbosity=0)
    data_dir = Path(settings.DATA_DIR)
    served: Background | Joined
    joined = Joined.find(data_dir)
    if joined is not None:
        print(
            f"simrun is already serving this data directory at {joined.record.url}: "
            "the demo runs on it and leaves it running",
            flush=True,
        )
        served = joined
    else:
        served = Background.start(data_dir=data_dir, port=args.port, cwd=ROOT)
    code = 1
    try:
        url = served.wait_serving()
        store = Path(settings.SIMRUN_STORE)
        client = Client(url, read_token(data_dir) or "", store=store)
        run = client.submit(args.workflow.read_text(), [args.source], group="demo")
        print(f"submitted run {run['id']} ({run['name']}); following it", flush=True)
        code = follow_run(client, run["id"], check=served.check)
        kept = None
        pages = "the services stop with the demo: `simrun demo --keep` leaves them running"
        login = None
        if args.keep or isinstance(served, Joined):
            kept = f"left at {url} (`simrun status` shows them); logs in {data_dir / 'logs'}"
            pages = f"{url}runs/{run['id']}/"
            login = login_link_line(data_dir, url)
        print_summary(
            summary_lines(
                client.show(run["id"]),
                output_paths(client, run["id"]),
                pages=pages,
                kept=kept,
                login=login,
            )
        )
        if args.keep:
            return code
    finally:
        if not args.keep:
            served.stop()
    return code

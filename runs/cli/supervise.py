"""`simrun serve` once it is set up: the supervisor alone, in a process without Django
(`runs/cli/handover.py` says why and how serve becomes it)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from runs.cli.base import CommandError
from runs.cli.handover import ServePlan
from runs.cli.restarts import RestartPolicy
from runs.cli.service_commands import service_commands
from runs.cli.serving import Watchfulness, serve_supervised


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="simrun")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--plan-fd", type=int, required=True)
    args = parser.parse_args(argv)
    with os.fdopen(args.plan_fd, "rb") as pipe:
        plan = ServePlan(**json.loads(pipe.read()))
    data_dir = Path(plan.data_dir)

    def greet(url: str) -> None:
        print(f"pages: {plan.login_line}", flush=True)

    try:
        return serve_supervised(
            on_serving=greet,
            data_dir=data_dir,
            store=Path(plan.store),
            port=plan.port,
            commands=lambda port: service_commands(port=port, data_dir=data_dir),
            pods_grace_s=plan.pods_grace_s,
            policy=RestartPolicy(burst=plan.restart_burst, window_s=plan.restart_window_s),
            watch=Watchfulness(
                deadline_s=plan.deadline_s,
                disks=tuple(Path(d) for d in plan.disks),
                min_free=plan.min_free,
                log_max_bytes=plan.log_max_bytes,
                log_backups=plan.log_backups,
                fork=plan.fork,
            ),
        )
    except CommandError as exc:
        print(f"simrun: {exc}", file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`simrun`: validate workflows, manage identities and tokens, submit and follow runs.

Without SIMRUN_URL it works directly on this machine's simrun (the embedded default, or the
database of DATABASE_URL); with SIMRUN_URL and SIMRUN_TOKEN it talks to the service's API.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from runs.cli.base import CommandError, django_ready

Handler = Callable[[argparse.Namespace], int]

INSTALLS = frozenset({"demo", "serve"})  # may make a new installation in the current directory
NEEDS_NONE = frozenset({"validate", "plugin"})  # read no database and no store
OVER_API = frozenset({"submit", "runs", "show", "follow", "cancel", "outputs", "logs"})


def build_parser() -> argparse.ArgumentParser:
    from runs.cli import (
        identity_commands,
        plugin_commands,
        run_commands,
        service_commands,
        workflow_commands,
    )

    parser = argparse.ArgumentParser(prog="simrun", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    workflow_commands.register(sub)
    identity_commands.register(sub)
    run_commands.register(sub)
    service_commands.register(sub)
    plugin_commands.register(sub)
    return parser


def require_installation(command: str) -> None:
    """CommandError unless `command` has an installation to work on: SIMRUN_DATA_DIR, the
    nearest `.simrun/` above here, or one it may make itself; never an empty new database."""
    if command in INSTALLS | NEEDS_NONE:
        return  # before any import of Django or the site: these commands must start fast
    from simrun_site import installation

    if django_ready() or installation.configured():
        return  # apps ready: Django was set up by whoever called us (manage.py, a test)
    if command in OVER_API and os.environ.get("SIMRUN_URL"):
        return
    if installation.nearest(Path.cwd().resolve()) is None:
        raise CommandError(installation.missing_message(Path.cwd()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        require_installation(args.command)
        return handler(args)
    except CommandError as exc:
        print(f"simrun: {exc}", file=sys.stderr)
        return exc.code
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        print(f"simrun: {_disk_full(exc)}; free space there and try again", file=sys.stderr)
        return 1
    except Exception as exc:
        # the service refused (SIMRUN_URL set): its answer, not a traceback; the client module
        # is loaded only then, so it is looked up rather than imported for every command
        client = sys.modules.get("runs.cli.api_client")
        if client is None or not isinstance(exc, client.ApiError):
            raise
        print(f"simrun: {exc.report()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _disk_full(exc: OSError) -> str:
    """The line naming the full disk a write of this command failed on."""
    from runs.disk_space import failed_write
    from simrun_site import installation

    configured = os.environ.get(installation.VARIABLE, "").strip()
    data_dir = Path(configured) if configured else installation.nearest(Path.cwd().resolve())
    return failed_write(exc, data_dir=data_dir.resolve() if data_dir else None).message()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


def entry() -> None:
    """The console script."""
    sys.exit(main())

"""`simrun`: validate workflows, manage identities and tokens, submit and follow runs.

The run verbs talk to the API (`runs/cli/client.py`): of SIMRUN_URL with SIMRUN_TOKEN, else
of this machine's `simrun serve`. The bootstrap and admin commands (serve, demo, stop, status,
identities and tokens, plugin) work on this machine's installation directly.
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
NEEDS_NONE = frozenset({"validate", "plugin", "crate"})  # read no database and no store
OVER_API = frozenset(
    {"submit", "runs", "show", "follow", "cancel", "outputs", "logs", "compare", "estimate"}
    | {"export"}
)
SIGPIPE_EXIT = 141  # the status of a command ended by SIGPIPE (128 + 13), as `ls | head` ends


def build_parser() -> argparse.ArgumentParser:
    from runs.cli import (
        crate_commands,
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
    crate_commands.register(sub)
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
        return  # a remote service: nothing of this machine is needed
    if installation.nearest(Path.cwd().resolve()) is None:
        raise CommandError(installation.missing_message(Path.cwd()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        require_installation(args.command)
        code = handler(args)
        sys.stdout.flush()  # here, so a reader that went away is noticed below
        return code
    except CommandError as exc:
        print(f"simrun: {exc}", file=sys.stderr)
        return exc.code
    except BrokenPipeError:  # `simrun runs | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush at exit
        return SIGPIPE_EXIT
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        print(f"simrun: {_disk_full(exc)}; free space there and try again", file=sys.stderr)
        return 1
    except Exception as exc:
        # the service's refusal or absence: one line, not a traceback; the client module is
        # loaded only by the run verbs, so it is looked up rather than imported here
        client = sys.modules.get("runs.cli.client")
        if client is not None and isinstance(exc, client.ApiError):
            print(f"simrun: {exc.report()}", file=sys.stderr)
            return 1
        if client is not None and isinstance(exc, client.Unreachable):
            print(f"simrun: {exc}", file=sys.stderr)
            return 1
        raise
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

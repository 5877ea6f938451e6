"""The shared edge of the console scripts: logging to stderr and exit codes for errors."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

from simrun_harness.config import ConfigError
from simrun_harness.exits import EXIT_CONFIGURATION, EXIT_FAILED

log = logging.getLogger("simrun")


def setup_logging() -> None:
    level = os.environ.get("SIMRUN_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )


def run_console(program: str, body: Callable[[], int]) -> NoReturn:
    """Run `body` and exit with its code; a ConfigError exits 4, anything else 1."""
    setup_logging()
    try:
        code = body()
    except ConfigError as exc:
        print(f"{program}: configuration error: {exc}", file=sys.stderr, flush=True)
        code = EXIT_CONFIGURATION
    except Exception:
        print(f"{program}: unexpected error:\n{traceback.format_exc()}", file=sys.stderr)
        code = EXIT_FAILED
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)

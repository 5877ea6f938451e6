"""The shared edge of the console scripts: logging to stderr and exit codes for errors."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from simrun_harness.config import ConfigError
from simrun_harness.exits import EXIT_CONFIGURATION, EXIT_FAILED, EXIT_STORE
from simrun_harness.store_access import as_store_failure

log = logging.getLogger("simrun")


def setup_logging() -> None:
    level = os.environ.get("SIMRUN_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )


def _store_root() -> Path | None:
    """The run directory of this pod: where a refused write is the store's failure."""
    run_dir = os.environ.get("SIMRUN_RUN_DIR")
    return Path(run_dir).resolve() if run_dir else None


def run_console(program: str, body: Callable[[], int]) -> NoReturn:
    """Run `body` and exit with its code; a ConfigError exits 4, a write the run store
    refused 5 (`store_access`), anything else 1."""
    setup_logging()
    try:
        code = body()
    except ConfigError as exc:
        print(f"{program}: configuration error: {exc}", file=sys.stderr, flush=True)
        code = EXIT_CONFIGURATION
    except Exception as exc:
        failure = as_store_failure(exc, _store_root())
        if failure is not None:
            print(f"{program}: {failure}", file=sys.stderr, flush=True)
            code = EXIT_STORE
        else:
            print(f"{program}: unexpected error:\n{traceback.format_exc()}", file=sys.stderr)
            code = EXIT_FAILED
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)

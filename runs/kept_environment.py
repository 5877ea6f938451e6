"""The files a run's environment was built from, kept in the run's directory (`environment/`).

A model without a `uv.lock` is resolved under constraints: the harness's pins as installed when
the run was submitted, or those of the run a crate records (`submit --from-crate`). The
submission keeps the model's `pyproject.toml` and its lock or constraints beside the run, so an
export records what the run was built from, not what the installation would use on the day it
is exported, and a re-run from a crate is resolved under the crate's constraints.

Read without following links and written without writing through one (run code may replace
files of its run).
"""

from __future__ import annotations

from collections.abc import Mapping

from runs.environments import CONSTRAINTS_FILE, KEPT_FILES
from runs.store import store
from simrun_harness.store_reads import NotInStore, TooLarge, read_bytes, write_file

ENVIRONMENT_DIR = "environment"
MAX_BYTES = 16 * 1024 * 1024


def _relative(run_id: str, name: str) -> str:
    return f"runs/{run_id}/{ENVIRONMENT_DIR}/{name}"


def kept_files(run_id: str) -> dict[str, bytes]:
    """The kept files of a run's environment by name (empty for a run that kept none)."""
    found = {}
    for name in KEPT_FILES:
        try:
            found[name] = read_bytes(store().root, _relative(run_id, name), limit=MAX_BYTES)
        except (NotInStore, TooLarge):
            continue
    return found


def kept_constraints(run_id: str) -> bytes | None:
    """The constraints the run is resolved under, if it keeps them."""
    return kept_files(run_id).get(CONSTRAINTS_FILE)


def keep(run_id: str, files: Mapping[str, bytes]) -> None:
    """Write the kept files of a run's environment (those of KEPT_FILES in `files`), each
    through a temporary name, replacing (never writing through) whatever holds its name;
    writing the same files again changes nothing."""
    for name in KEPT_FILES:
        if name in files:
            write_file(store().root, _relative(run_id, name), files[name], make_dirs=1)

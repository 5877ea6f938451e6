"""The identity and the build context of a model's environment.

A model snapshot with a `pyproject.toml` runs in an environment of its own: its dependencies
from its `uv.lock`, or, without a lock, resolved under the pinned versions of the harness's
dependencies (`constraints.txt` of the context), plus the harness. The environment is named
by a digest of its context (so of the lock), the Python version and the harness (its version
and the digest of its files): two runs of the same model share it, and it is built once. A
model without a `pyproject.toml` runs in the service's own environment (`SERVICE_ENVIRONMENT`)
locally, the default image on the cluster.

A model whose dependencies include local paths (runs/local_packages.py) is built from its
snapshot directory, so relative paths resolve there; the digest of every local package's files
is part of the context (`local-packages.json`), so an edited plugin gives a new environment.
The snapshot's location (`source-dir`) travels in the context but is not part of the name.

No Django here: the backends and the command-line client use it too.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Mapping
from functools import cache
from importlib.metadata import PackageNotFoundError, requires, version
from importlib.util import find_spec
from pathlib import Path

from runs.local_packages import (
    PROJECT_MAX_BYTES,
    LocalPackageRules,
    identity_text,
    local_packages,
    tree_digest,
)
from simrun_harness import store_reads

SERVICE_ENVIRONMENT = "service"
HARNESS = "simrun-harness"
PROJECT_FILE = "pyproject.toml"
LOCK_FILE = "uv.lock"
CONSTRAINTS_FILE = "constraints.txt"
LOCAL_PACKAGES_FILE = "local-packages.json"
KEPT_FILES = (PROJECT_FILE, LOCK_FILE, CONSTRAINTS_FILE)
"""The files of a context a run keeps in its directory (`environment/`): what it was built
from, so an export records the run's lock or constraints, not those of the day it is made."""
SOURCE_DIR_FILE = "source-dir"
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def python_version() -> str:
    """The Python of the environments built here: the service's, as `major.minor`."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def harness_version() -> str:
    """The version of the installed harness, which every environment gets."""
    return version(HARNESS)


def harness_identity(package: Path | None = None) -> str:
    """The harness's version and a digest of its package's files (`package`: the installed
    `simrun_harness`), which names the environments. Its version stays 0.1.0 while its code
    changes (an upgrade of simrun, an edit in a checkout): named by the version alone, an
    environment would keep the harness it was first built with for ever."""
    if package is None:
        return _installed_harness_identity()
    return f"{harness_version()}+{tree_digest(package)[:16]}"


@cache
def _installed_harness_identity() -> str:  # the installed package changes with the process
    spec = find_spec("simrun_harness")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the simrun_harness package is not installed")
    return harness_identity(Path(next(iter(spec.submodule_search_locations))))


def harness_constraints() -> bytes:
    """The pins of the harness's dependencies, as installed with the service.

    A model without a lock is resolved under them, so its environment agrees with the
    service about the harness's own libraries (pydantic, psutil).
    """
    lines = []
    for requirement in requires(HARNESS) or []:
        if ";" in requirement and "extra ==" in requirement:
            continue
        match = _REQUIREMENT_NAME.match(requirement)
        if match is None:
            continue
        name = match.group(1)
        try:
            lines.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            continue
    return "".join(f"{line}\n" for line in sorted(lines)).encode()


def environment_context(
    model_dir: Path,
    *,
    constraints: bytes | None = None,
    local_rules: LocalPackageRules | None = None,
) -> dict[str, bytes]:
    """The flat build context of a model's environment; empty when it has no pyproject.toml.

    The context holds the model's `pyproject.toml` and its `uv.lock`, or, without a lock,
    the pinned constraints it is resolved under: `constraints` when given (those a run was
    resolved under before, e.g. the run a crate records), else the harness's as installed.
    Only the dependencies are installed, not the model project itself (its files are in the
    snapshot every pod reads). `local_rules`: where its local packages may lie besides the
    snapshot (none: only there), LocalPackageRefused for one elsewhere.
    """
    # a snapshot's files, read without following a link (the snapshot is below its store's
    # `snapshots/`): a pyproject.toml linked to a secret would otherwise be built, and echoed
    root = model_dir.parent.parent
    try:
        project = store_reads.read_bytes(root, model_dir / PROJECT_FILE, limit=PROJECT_MAX_BYTES)
    except FileNotFoundError:
        return {}
    context = {PROJECT_FILE: project}
    if store_reads.is_file(root, model_dir / LOCK_FILE):
        context[LOCK_FILE] = store_reads.read_bytes(
            root, model_dir / LOCK_FILE, limit=PROJECT_MAX_BYTES
        )
    else:
        context[CONSTRAINTS_FILE] = harness_constraints() if constraints is None else constraints
    packages = local_packages(model_dir, local_rules)
    if packages:
        context[LOCAL_PACKAGES_FILE] = identity_text(packages)
        context[SOURCE_DIR_FILE] = str(model_dir.resolve()).encode()
    return context


def local_packages_of(context: Mapping[str, bytes]) -> list[dict[str, str]]:
    """The name and digest of every local package an environment's context installs."""
    data = context.get(LOCAL_PACKAGES_FILE)
    return list(json.loads(data)) if data else []


def environment_digest(context: Mapping[str, bytes], python: str, harness: str) -> str:
    """The name of an environment: a SHA-256 of its context (but where its sources lie),
    Python version and harness."""
    digest = hashlib.sha256()
    for part in (b"simrun-environment/1", python.encode(), harness.encode()):
        digest.update(len(part).to_bytes(8, "big") + part)
    for name in sorted(set(context) - {SOURCE_DIR_FILE}):
        for part in (name.encode(), context[name]):
            digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def model_environment(
    model_dir: Path,
    *,
    constraints: bytes | None = None,
    local_rules: LocalPackageRules | None = None,
) -> tuple[str, dict[str, bytes]]:
    """The environment a model runs in and its context: (`SERVICE_ENVIRONMENT`, {}) without
    a pyproject.toml, else (its digest for this Python and harness, its context).
    `constraints`, `local_rules`: as for `environment_context`."""
    context = environment_context(model_dir, constraints=constraints, local_rules=local_rules)
    if not context:
        return SERVICE_ENVIRONMENT, {}
    return environment_digest(context, python_version(), harness_identity()), context

"""Local environments: relocatable virtual environments built with uv, one per digest.

An environment is built into a temporary directory beside its final place and renamed into
place when complete (uv's relocatable environments keep working after the move), so a half
built environment is never used; of two builders of one digest the first rename wins and the
other finds the environment. The harness and the example plugin are not on an index: their
wheels are built once into a wheel directory that uv resolves with `--find-links`.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import uv

from cluster.local.atomic_files import locked
from runs.environments import (
    CONSTRAINTS_FILE,
    HARNESS,
    LOCK_FILE,
    PROJECT_FILE,
    SERVICE_ENVIRONMENT,
    SOURCE_DIR_FILE,
    harness_identity,
    harness_version,
    local_packages_of,
    python_version,
)
from runs.local_packages import LocalPackage, LocalPackageRules, local_packages, tree_digest
from simrun_harness.layout import check_name

MARKER = ".simrun-environment.json"
REPO_ROOT = Path(__file__).resolve().parents[2]
WHEEL_SOURCES = (REPO_ROOT / "harness", REPO_ROOT / "examples" / "simrun-examples")
BUILD_TIMEOUT_S = 1800
LOG_TAIL_LINES = 40


def environment_exists(ref: str, root: Path) -> bool:
    """Whether the environment `ref` is built (the service's always is)."""
    if ref == SERVICE_ENVIRONMENT:
        return True
    return (root / check_name(ref, what="environment") / MARKER).is_file()


def _run(args: Sequence[str | Path], cwd: Path, what: str) -> None:
    env = dict(os.environ, UV_PYTHON_DOWNLOADS="never", NO_COLOR="1")
    try:
        done = subprocess.run(
            [str(a) for a in args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{what} took longer than {BUILD_TIMEOUT_S} s") from exc
    if done.returncode != 0:
        lines = (done.stdout + done.stderr).strip().splitlines()[-LOG_TAIL_LINES:]
        raise RuntimeError(f"{what} failed (exit {done.returncode}):\n" + "\n".join(lines))


def _wheel_name(source: Path) -> str:
    """The distribution name of a source tree as wheel files spell it."""
    text = (source / PROJECT_FILE).read_text()
    for line in text.splitlines():
        if line.strip().startswith("name"):
            return line.split("=", 1)[1].strip().strip("\"'").replace("-", "_")
    raise RuntimeError(f"no project name in {source / PROJECT_FILE}")


def ensure_wheels(wheels: Path, sources: Sequence[Path] = WHEEL_SOURCES) -> Path:
    """Build the wheels of the harness and the example plugin (those whose sources are here)
    into a directory of `wheels` named by a digest of their files, once; that directory.
    Their versions never change, so a wheel found by its version would install an old harness
    into every environment built after an upgrade or an edit."""
    present = [source for source in sources if (source / PROJECT_FILE).is_file()]
    digest = hashlib.sha256()
    for source in present:
        digest.update(f"{source.name}:{tree_digest(source)}\n".encode())
    folder = wheels / f"sources-{digest.hexdigest()[:16]}"
    uv_bin = uv.find_uv_bin()
    # Processes (worker, watcher) that build environments at once: without it two of them
    # find no wheel and both build into the same directory, one reading the other's half.
    wheels.mkdir(parents=True, exist_ok=True)
    with locked(wheels / ".lock"):
        for source in present:
            if any(folder.glob(f"{_wheel_name(source)}-*.whl")):
                continue
            # built with this Python's own build backend (hatchling, a requirement of the
            # service), not in an isolated environment that uv fills from the package index
            args: list[str | Path] = [uv_bin, "build", "--wheel", "--python", sys.executable]
            args += ["--no-build-isolation", "--out-dir", folder]
            _run([*args, source], source, f"building the wheel of {source.name}")
    return folder


def _harness_wheel(wheels: Path) -> Path:
    """The harness's wheel in the wheel directory `ensure_wheels` made."""
    found = sorted(wheels.glob(f"{_wheel_name(REPO_ROOT / 'harness')}-{harness_version()}-*.whl"))
    if not found:
        raise RuntimeError(f"no wheel of {HARNESS} {harness_version()} in {wheels}")
    return found[0]


def _local_requirement(package: LocalPackage) -> str:
    """A local package as a requirement naming its directory: `name @ file:///path`."""
    return f"{package.name} @ {package.path.as_uri()}"


def _requirements(
    project: Path, out: Path, wheels: Path, uv_bin: str, *, constraints: Path | None, local: bool
) -> Path:
    """Pin the model's dependencies: export its lock, or resolve under the constraints.

    With local packages and no lock the project file itself is the requirement (`uv pip
    install -r pyproject.toml` resolves its `[tool.uv.sources]` paths from the project)."""
    if (project / LOCK_FILE).exists():
        args: list[str | Path] = [uv_bin, "export", "--frozen", "--no-dev", "--no-emit-project"]
        args += ["--no-hashes", "--no-header", "--no-annotate", "--output-file", out]
        _run(args, project, "exporting the lock of the model")
        return out
    if local:
        return project / PROJECT_FILE
    args = [uv_bin, "pip", "compile", project / PROJECT_FILE, "--python", sys.executable]
    args += ["--find-links", wheels, "--output-file", out, "--no-header"]
    if constraints is not None:
        args += ["--constraints", constraints]
    _run(args, project, "resolving the dependencies of the model")
    return out


def _project(context: Mapping[str, bytes], build: Path) -> tuple[Path, Path | None]:
    """The directory the model's project is read from, and its constraints file.

    A context with local packages names the model's snapshot (`source-dir`): the build reads
    it there so relative paths resolve; else the context's files are written to `build`."""
    source = context.get(SOURCE_DIR_FILE)
    project = Path(source.decode()) if source else build / "project"
    if not source:
        project.mkdir()
        for name, data in context.items():
            (project / name).write_bytes(data)
    elif not (project / PROJECT_FILE).is_file():
        raise ValueError(f"the model directory {project} has no {PROJECT_FILE}")
    constraints = None
    if CONSTRAINTS_FILE in context:
        constraints = build / CONSTRAINTS_FILE
        constraints.write_bytes(context[CONSTRAINTS_FILE])
    return project, constraints


def _check_context(context: Mapping[str, bytes], ref: str) -> None:
    """ValueError for a context without a pyproject.toml or one that is not flat."""
    if PROJECT_FILE not in context:
        raise ValueError(f"the context of environment {ref} has no {PROJECT_FILE}")
    for name in context:
        if not name or "/" in name or name in {".", ".."}:
            raise ValueError(f"the context of an environment is flat: {name!r} is a path")


def _write_marker(venv: Path, ref: str, context: Mapping[str, bytes]) -> None:
    """The file that makes a directory a finished environment, and says what it holds."""
    marker: dict[str, object] = {
        "ref": ref,
        "python": python_version(),
        "harness": harness_identity(),
        "local_packages": local_packages_of(context),
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (venv / MARKER).write_text(json.dumps(marker, indent=1))


def build_environment(
    context: Mapping[str, bytes],
    ref: str,
    root: Path,
    wheels: Path,
    local_rules: LocalPackageRules | None = None,
) -> None:
    """Build the environment `ref` from a flat context, unless it exists. `local_rules`:
    where the model's local packages may lie besides its snapshot (default: only there).

    Raises ValueError for a context that is not flat or has no pyproject.toml, RuntimeError
    with the last lines of the failing step's output when the build fails.
    """
    if environment_exists(ref, root):
        return
    _check_context(context, ref)
    wheels = ensure_wheels(wheels)
    uv_bin = uv.find_uv_bin()
    root.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=f".build-{ref[:16]}-", dir=root))
    try:
        project, constraints = _project(context, build)
        local = [p["name"] for p in local_packages_of(context)]
        requirements = _requirements(
            project,
            build / "requirements.txt",
            wheels,
            uv_bin,
            constraints=constraints,
            local=bool(local),
        )
        venv = build / "venv"
        _run([uv_bin, "venv", "--relocatable", "--python", sys.executable, venv], build, "uv venv")
        # compiled now: pods run it with PYTHONDONTWRITEBYTECODE or read-only, compiling at
        # every start what was not (0.3 s of pydantic and the harness, per pod)
        args: list[str | Path] = [uv_bin, "pip", "install", "--compile-bytecode"]
        args += ["--python", venv / "bin" / "python"]
        # an exported local package is an unnamed requirement, which uv refuses as a pin
        pins = constraints if local else requirements
        args += ["-r", requirements]
        if pins is not None:
            args += ["-c", pins]
        # its version is the same old one in every wheel: named by its file in this wheel
        # directory (named by the digest of its sources), never found in uv's cache of an
        # earlier harness by its version
        args += [_harness_wheel(wheels), "--find-links", wheels]
        # uv keeps a built wheel of a local directory until its pyproject.toml changes, but
        # rebuilds a directory named on the command line: an edited module is never installed
        # stale from the cache. Not `--refresh-package`, which uv refuses offline (UV_OFFLINE:
        # the tests run with the package index unreachable)
        args += [_local_requirement(p) for p in local_packages(project, local_rules)]
        _run(args, project, "installing the environment")
        _write_marker(venv, ref, context)
        _publish(venv, root, ref)
    finally:
        shutil.rmtree(build, ignore_errors=True)


def _publish(venv: Path, root: Path, ref: str) -> None:
    """Rename a finished environment into place; one another process put there first wins."""
    try:
        os.rename(venv, root / ref)
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not environment_exists(ref, root):
            raise

"""Environments of models: their identity, and real builds with uv into the store."""

from __future__ import annotations

import shutil
import subprocess
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import uv

import simrun_harness
from cluster.local import venvs
from cluster.local.backend import LocalBackend
from runs.environments import (
    SERVICE_ENVIRONMENT,
    environment_context,
    environment_digest,
    harness_identity,
    harness_version,
    model_environment,
    python_version,
)
from runs.ports import TaskLaunch, WorkflowPhase
from tests.builders import LOCAL
from tests.cluster.local.builders import launch
from tests.waiting import wait_for

HARNESS_ONLY = """
[project]
name = "tiny-model"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["simrun-harness"]
"""
MISSING_DEPENDENCY = """
[project]
name = "broken-model"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["simrun-no-such-package-for-tests"]
"""
NO_DEPENDENCIES = """
[project]
name = "bare-model"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = []
"""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The harness's wheels, built once for the module."""
    return venvs.ensure_wheels(tmp_path_factory.mktemp("wheels"))


def model(tmp_path: Path, pyproject: str, *, lock: bool = False) -> Path:
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "pyproject.toml").write_text(pyproject)
    if lock:
        subprocess.run([uv.find_uv_bin(), "lock", "--offline"], cwd=directory, check=True)
    return directory


# -- identity -------------------------------------------------------------------------------


def test_a_model_without_pyproject_runs_in_the_service_environment(tmp_path: Path) -> None:
    (tmp_path / "model.xml").write_text("<sbml/>")
    assert environment_context(tmp_path) == {}
    assert model_environment(tmp_path) == (SERVICE_ENVIRONMENT, {})


def test_a_model_file_that_is_a_link_is_not_read_into_the_environment(tmp_path: Path) -> None:
    """A run's code (the service's own user on the embedded default) may make a snapshot's
    pyproject.toml or uv.lock a link to a secret: it reads as absent, never built or echoed."""
    secret = tmp_path / "secret_key"
    secret.write_text("[project]\nname = 'the-secret'\n")
    directory = tmp_path / "snapshots" / "model"
    directory.mkdir(parents=True)
    (directory / "pyproject.toml").symlink_to(secret)
    assert environment_context(directory) == {}
    (directory / "pyproject.toml").unlink()
    (directory / "pyproject.toml").write_text(HARNESS_ONLY)
    (directory / "uv.lock").symlink_to(secret)
    assert b"the-secret" not in b"".join(environment_context(directory).values())


def test_a_model_without_a_lock_is_resolved_under_the_pinned_constraints(tmp_path: Path) -> None:
    context = environment_context(model(tmp_path, HARNESS_ONLY))
    assert sorted(context) == ["constraints.txt", "pyproject.toml"]
    assert b"pydantic==" in context["constraints.txt"]


def test_a_locked_model_brings_its_lock(tmp_path: Path) -> None:
    context = environment_context(model(tmp_path, NO_DEPENDENCIES, lock=True))
    assert sorted(context) == ["pyproject.toml", "uv.lock"]


def test_the_digest_names_the_lock_the_python_and_the_harness() -> None:
    context = {"pyproject.toml": b"a", "uv.lock": b"b"}
    digest = environment_digest(context, "3.13", "0.1.0")
    assert digest == environment_digest(dict(reversed(context.items())), "3.13", "0.1.0")
    assert (
        len(
            {
                digest,
                environment_digest({**context, "uv.lock": b"c"}, "3.13", "0.1.0"),
                environment_digest(context, "3.12", "0.1.0"),
                environment_digest(context, "3.13", "0.2.0"),
            }
        )
        == 4
    )


def test_the_harness_is_named_by_its_files_not_only_its_version(tmp_path: Path) -> None:
    """Its version never changes: an edited or upgraded harness must name new environments,
    or they would keep the harness they were first built with; caches do not count."""
    package = tmp_path / "simrun_harness"
    package.mkdir()
    (package / "worker.py").write_text("A = 1\n")
    first = harness_identity(package)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "worker.cpython-313.pyc").write_bytes(b"compiled")
    assert harness_identity(package) == first
    (package / "worker.py").write_text("A = 2\n")
    assert harness_identity(package) != first
    assert first.startswith(harness_version() + "+")


def test_a_model_environment_is_named_with_the_installed_harness(tmp_path: Path) -> None:
    folder = model(tmp_path, NO_DEPENDENCIES)
    installed = Path(simrun_harness.__file__).parent
    expected = environment_digest(
        environment_context(folder), python_version(), harness_identity(installed)
    )
    assert model_environment(folder)[0] == expected


def test_an_edited_harness_gets_wheels_of_its_own(tmp_path: Path) -> None:
    """The wheels are kept by a digest of their sources: an edit builds new ones (with the
    edit), and the same sources find theirs again without building."""
    source = tmp_path / "harness"
    shutil.copytree(
        venvs.REPO_ROOT / "harness", source, ignore=shutil.ignore_patterns("__pycache__")
    )
    first = venvs.ensure_wheels(tmp_path / "wheels", sources=(source,))
    [wheel] = first.glob("simrun_harness-*.whl")
    built = wheel.stat().st_mtime_ns
    assert venvs.ensure_wheels(tmp_path / "wheels", sources=(source,)) == first
    assert wheel.stat().st_mtime_ns == built
    init = source / "src" / "simrun_harness" / "__init__.py"
    init.write_text(init.read_text() + "EDITED = 1\n")

    second = venvs.ensure_wheels(tmp_path / "wheels", sources=(source,))

    assert second != first
    [edited] = second.glob("simrun_harness-*.whl")
    with zipfile.ZipFile(edited) as archive:
        assert "EDITED = 1" in archive.read("simrun_harness/__init__.py").decode()


def test_the_wheels_are_built_with_the_package_index_unreachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After set-up nothing is fetched: the harness's wheel is built by the build backend
    installed with simrun, not one uv would fetch into an isolated environment (here uv has
    an empty cache and may not reach the index)."""
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("UV_OFFLINE", "1")
    source = tmp_path / "harness"
    shutil.copytree(
        venvs.REPO_ROOT / "harness", source, ignore=shutil.ignore_patterns("__pycache__")
    )

    built = venvs.ensure_wheels(tmp_path / "wheels", sources=(source,))

    assert [w.name for w in built.glob("*.whl")] == ["simrun_harness-0.1.0-py3-none-any.whl"]


# -- builds ---------------------------------------------------------------------------------


def test_an_environment_is_built_once_and_its_pods_run_in_it(
    make_backend: Callable[..., LocalBackend], store: Path, tmp_path: Path, wheels: Path
) -> None:
    backend = make_backend(wheels_dir=wheels)
    ref, context = model_environment(model(tmp_path, HARNESS_ONLY))
    assert not backend.has_image(ref)

    backend.build_image(context, ref)

    assert backend.has_image(ref)
    built = store / "environments" / ref
    marker = (built / venvs.MARKER).stat().st_mtime_ns
    backend.build_image(context, ref)  # found, not built again
    assert (built / venvs.MARKER).stat().st_mtime_ns == marker
    assert (built / "bin" / "simrun-worker").exists()
    code = "import sys, simrun_harness; print(sys.prefix)"
    plan = LOCAL.plan()
    task = TaskLaunch("where", "command", False, (), plan, command=("python", "-c", code))
    name = backend.submit(launch("r1", task, environment=ref))
    wait_for(lambda: backend.status(name).phase is WorkflowPhase.SUCCEEDED)
    assert backend.logs(name, "where")[0].text.strip() == str(built)


def test_a_locked_environment_installs_its_lock_and_the_harness(
    tmp_path: Path, wheels: Path
) -> None:
    context = environment_context(model(tmp_path, NO_DEPENDENCIES, lock=True))
    ref = environment_digest(context, python_version(), harness_identity())
    venvs.build_environment(context, ref, tmp_path / "environments", wheels)
    python = tmp_path / "environments" / ref / "bin" / "python"
    subprocess.run([python, "-c", "import simrun_harness, pydantic"], check=True)


def test_an_environment_is_built_with_the_package_index_unreachable(
    tmp_path: Path, wheels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What set-up installed is in uv's cache: a model of the harness alone is resolved and
    installed from it with uv offline (no flag that needs the index, such as a refresh)."""
    monkeypatch.setenv("UV_OFFLINE", "1")
    context = environment_context(model(tmp_path, HARNESS_ONLY))
    ref = environment_digest(context, python_version(), harness_identity())

    venvs.build_environment(context, ref, tmp_path / "environments", wheels)

    python = tmp_path / "environments" / ref / "bin" / "python"
    subprocess.run([python, "-c", "import simrun_harness, pydantic"], check=True)


def test_concurrent_builders_of_one_environment_both_find_it(tmp_path: Path, wheels: Path) -> None:
    context = environment_context(model(tmp_path, NO_DEPENDENCIES))
    ref = environment_digest(context, python_version(), harness_identity())
    root = tmp_path / "environments"
    errors: list[BaseException] = []

    def build() -> None:
        try:
            venvs.build_environment(context, ref, root, wheels)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert venvs.environment_exists(ref, root)
    assert [p.name for p in root.iterdir()] == [ref]  # no build directory left behind


def test_a_build_that_fails_raises_with_the_last_lines_of_its_output(
    tmp_path: Path, wheels: Path
) -> None:
    context = environment_context(model(tmp_path, MISSING_DEPENDENCY))
    ref = environment_digest(context, python_version(), harness_identity())
    root = tmp_path / "environments"
    with pytest.raises(RuntimeError, match="simrun-no-such-package-for-tests"):
        venvs.build_environment(context, ref, root, wheels)
    assert not venvs.environment_exists(ref, root)
    assert list(root.iterdir()) == []


def test_a_context_that_is_not_flat_is_refused(tmp_path: Path, wheels: Path) -> None:
    context = {"pyproject.toml": b"", "src/model.py": b""}
    with pytest.raises(ValueError, match="flat"):
        venvs.build_environment(context, "x", tmp_path, wheels)

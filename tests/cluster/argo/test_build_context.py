"""The image build of a model with local packages has them in its context, where its
pyproject.toml names them, and its Dockerfile installs them as the local backend does."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from cluster.argo import images
from cluster.argo.build_context import LOCAL_ARCHIVE, with_local_packages
from runs.environments import LOCAL_PACKAGES_FILE, SOURCE_DIR_FILE, environment_context
from runs.local_packages import LocalPackageRules, local_packages, tree_digest
from tests.cluster.argo.lab import Lab

DIGEST = "cd" * 32


def package(folder: Path, name: str) -> Path:
    (folder / "src" / name).mkdir(parents=True)
    (folder / "pyproject.toml").write_text(f"[project]\nname = '{name}'\nversion = '0.1'\n")
    (folder / "src" / name / "__init__.py").write_text("VALUE = 1\n")
    (folder / "src" / name / "__pycache__").mkdir()
    (folder / "src" / name / "__pycache__" / "x.pyc").write_bytes(b"\0")
    return folder


def allowing(tmp_path: Path) -> LocalPackageRules:
    """The rules of an operator who allows the local packages of `elsewhere/`."""
    return LocalPackageRules(roots=(tmp_path / "elsewhere",))


def model(tmp_path: Path) -> tuple[Path, Path]:
    """A model naming `plug` by a relative [tool.uv.sources] path and `other` by file://
    in an allowed directory."""
    model_dir = tmp_path / "model"
    package(model_dir / "plugins" / "plug", "plug")
    other = package(tmp_path / "elsewhere" / "other", "other")
    (model_dir / "pyproject.toml").write_text(
        "[project]\nname = 'm'\nversion = '0'\n"
        f"dependencies = ['plug', 'other @ file://{other}']\n"
        "[tool.uv.sources]\nplug = { path = 'plugins/plug', editable = true }\n"
    )
    return model_dir, other


def test_the_context_holds_each_local_package_where_the_image_build_looks(
    tmp_path: Path,
) -> None:
    model_dir, other = model(tmp_path)
    rules = allowing(tmp_path)
    context = with_local_packages(environment_context(model_dir, local_rules=rules), rules)
    again = with_local_packages(environment_context(model_dir, local_rules=rules), rules)
    assert again == context  # same bytes
    images.check_context(context)
    root = tmp_path / "image"
    with tarfile.open(fileobj=io.BytesIO(context[LOCAL_ARCHIVE]), mode="r:gz") as tar:
        tar.extractall(root, filter="data")
    digests = {p.name: p.digest for p in local_packages(model_dir, rules)}
    plug = root / "opt/simrun/model/plugins/plug"
    assert tree_digest(plug) == digests["plug"]
    assert tree_digest(root / str(other).lstrip("/")) == digests["other"]
    assert not (plug / "src/plug/__pycache__").exists()


def test_a_model_without_local_packages_gets_no_archive(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'm'\nversion = '0'\n")
    assert LOCAL_ARCHIVE not in with_local_packages(environment_context(tmp_path))


def test_a_package_edited_after_its_environment_was_named_is_refused(tmp_path: Path) -> None:
    model_dir, other = model(tmp_path)
    context = environment_context(model_dir, local_rules=allowing(tmp_path))
    (other / "src/other/__init__.py").write_text("VALUE = 2\n")
    with pytest.raises(ValueError, match="changed since its environment was named"):
        with_local_packages(context, allowing(tmp_path))


def test_the_cluster_build_sends_the_local_packages_in_its_configmap(
    sim_lab: Lab, tmp_path: Path
) -> None:
    sim = sim_lab.sim
    assert sim is not None
    model_dir, _ = model(tmp_path)
    rules = allowing(tmp_path)
    sim_lab.backend.config = replace(sim_lab.backend.config, local_packages=rules)
    sim_lab.backend.build_image(environment_context(model_dir, local_rules=rules), DIGEST)
    [build] = sim.buildkit.builds
    assert build.succeeded
    assert build.context[LOCAL_ARCHIVE].endswith("base64 chars>")
    assert build.context["Dockerfile"] == images.DOCKERFILE


def dockerfile_script() -> str:
    """The shell of the Dockerfile's RUN."""
    text = images.DOCKERFILE.split("\nRUN ", 1)[1].split("\nENV ", 1)[0]
    return text.replace("\\\n", " ")  # as Docker joins continued lines


@pytest.mark.parametrize(
    ("files", "installs"),
    [
        (["uv.lock"], "-r requirements.txt --constraints requirements.txt"),
        (["uv.lock", LOCAL_ARCHIVE], "-r requirements.txt simrun-harness"),
        (["constraints.txt", LOCAL_ARCHIVE], "-r pyproject.toml --constraints constraints.txt"),
        (["constraints.txt"], "-r requirements.txt --constraints requirements.txt"),
    ],
)
def test_the_dockerfile_installs_as_the_local_backend_does(
    tmp_path: Path, files: list[str], installs: str
) -> None:
    """uv and tar are stand-ins that note how they are called: with local packages the
    exported lock is no pin (its local entries are unnamed), without a lock the project file
    is the requirement under the harness's constraints."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("uv", "tar"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "$CALLS"\n')
        (bin_dir / tool).chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    for name in ["pyproject.toml", *files]:
        (work / name).write_text("")
    calls = tmp_path / "calls"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls)}
    subprocess.run(["sh", "-c", dockerfile_script()], cwd=work, env=env, check=True)
    install = calls.read_text().splitlines()[-1]
    assert install.startswith(
        "uv pip install --compile-bytecode --python /opt/simrun/env/bin/python"
    )
    assert installs in install
    unpacked = f"tar -xzf {LOCAL_ARCHIVE} -C /" in calls.read_text()
    assert unpacked == (LOCAL_ARCHIVE in files)


def test_a_package_outside_the_snapshot_and_the_allowed_directories_is_never_packed(
    tmp_path: Path,
) -> None:
    """A context naming a package at an absolute path no directory allows (made before the
    setting changed, or by hand): the build refuses it, and no byte of it is archived."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    secret = tmp_path / "secrets" / "..2026_01_01"
    secret.mkdir(parents=True)
    (secret / "database-url").write_text("postgres://simrun:hunter2@db/simrun")
    project = f"[project]\nname = 'm'\nversion = '0'\ndependencies = ['s @ {secret.as_uri()}']\n"
    (model_dir / "pyproject.toml").write_text(project)
    named = json.dumps([{"digest": tree_digest(secret), "name": "s"}], sort_keys=True)
    context = {
        "pyproject.toml": project.encode(),
        "constraints.txt": b"",
        LOCAL_PACKAGES_FILE: named.encode(),
        SOURCE_DIR_FILE: str(model_dir).encode(),
    }
    with pytest.raises(ValueError, match="outside the directories allowed for local packages"):
        with_local_packages(context)

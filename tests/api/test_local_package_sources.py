"""A model's local packages at submission: inside its snapshot, or inside a directory the
operator allows (SIMRUN_LOCAL_PACKAGE_ROOTS); anything else is a 400 naming the entry, the
path it gave and what is allowed, and nothing is recorded (docs/security.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pytest_django import Settings

from runs.environments import local_packages_of
from runs.local_packages import tree_digest
from runs.models import Run, Snapshot
from runs.services.submission import environment_of
from runs.snapshots import snapshot_directory
from simrun_harness.layout import StorePaths
from tests.api.conftest import Lab

pytestmark = pytest.mark.django_db

COMMAND = {"name": "c", "tasks": [{"id": "c", "type": "command", "settings": {"args": ["true"]}}]}
ALLOWED = "SIMRUN_LOCAL_PACKAGE_ROOTS: none"


def pyproject(dependencies: list[str], sources: str = "") -> str:
    return (
        f"[project]\nname = 'm'\nversion = '0'\ndependencies = {dependencies!r}\n"
        f"[tool.uv.sources]\n{sources}"
    )


def package(folder: Path, files: int = 1, size: int = 8) -> Path:
    (folder / "src").mkdir(parents=True)
    for n in range(files):
        (folder / "src" / f"m{n}.py").write_bytes(b"x" * size)
    return folder


def secrets(tmp_path: Path) -> Path:
    """What a worker mounts and no run may pack into its image."""
    folder = tmp_path / "secrets" / "..2026_01_01"
    folder.mkdir(parents=True)
    (folder / "database-url").write_text("postgres://simrun:hunter2@db/simrun")
    return folder


def snapshot(store: Path, model: Path) -> str:
    info = snapshot_directory(StorePaths(store), model)
    Snapshot.objects.create(digest=info.digest, name=model.name)
    return info.digest


def submit(lab: Lab, digest: str):  # type: ignore[no-untyped-def]
    return lab.person.client.post(
        "/api/runs/", {"workflow": COMMAND, "sources": [digest]}, format="json"
    )


def installed(run: Run) -> list[dict[str, str]]:
    """The local packages the run's environment installs, as its submission names them."""
    return local_packages_of(environment_of(run)[1])


def model_with(tmp_path: Path, text: str) -> Path:
    model = tmp_path / "model"
    package(model / "plugin")
    (model / "pyproject.toml").write_text(text)
    return model


@pytest.mark.parametrize("form", ["sources", "file-url"])
def test_a_local_package_outside_the_snapshot_and_the_allowed_directories_is_400(
    lab: Lab, store: Path, tmp_path: Path, form: str
) -> None:
    secret = secrets(tmp_path)
    if form == "sources":
        text = pyproject(["plug"], f"plug = {{ path = '{secret}' }}\n")
        entry = f"[tool.uv.sources] plug = {{ path = '{secret}' }}"
    else:
        text = pyproject([f"plug @ {secret.as_uri()}"])
        entry = f"the dependency 'plug @ {secret.as_uri()}'"
    digest = snapshot(store, model_with(tmp_path, text))

    response = submit(lab, digest)

    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "submission_refused"
    assert response.json()["detail"] == (
        f"sources: the model's pyproject.toml: {entry}: {secret} is outside the model "
        f"directory and outside the directories allowed for local packages ({ALLOWED}); put "
        "the package inside the model directory and name it by a relative path"
    )
    assert not Run.objects.exists()


@pytest.mark.parametrize("written", ["../../..", "plugin/../../secrets"])
def test_a_relative_path_out_of_the_snapshot_is_400_saying_what_is_allowed(
    lab: Lab, store: Path, tmp_path: Path, written: str
) -> None:
    secrets(tmp_path)
    text = pyproject(["plug"], f"plug = {{ path = '{written}' }}\n")
    digest = snapshot(store, model_with(tmp_path, text))

    response = submit(lab, digest)

    assert response.status_code == 400, response.json()
    detail = response.json()["detail"]
    assert detail.startswith(
        f"sources: the model's pyproject.toml: [tool.uv.sources] plug = {{ path = '{written}' }}: "
    )
    assert ALLOWED in detail
    assert not Run.objects.exists()


def test_a_package_in_an_allowed_directory_is_installed_and_a_dot_dot_out_of_it_is_not(
    lab: Lab, store: Path, tmp_path: Path, settings: Settings
) -> None:
    plugins = tmp_path / "plugins"
    plug = package(plugins / "plug")
    secret = secrets(tmp_path)
    settings.SIMRUN_LOCAL_PACKAGE_ROOTS = [plugins]
    inside = snapshot(store, model_with(tmp_path, pyproject([f"plug @ {plug.as_uri()}"])))

    accepted = submit(lab, inside)

    assert accepted.status_code == 201, accepted.json()
    assert installed(Run.objects.get()) == [{"name": "plug", "digest": tree_digest(plug)}]
    escaping = f"{plugins}/../secrets/{secret.name}"
    (tmp_path / "model" / "pyproject.toml").write_text(
        pyproject(["plug"], f"plug = {{ path = '{escaping}' }}\n")
    )
    refused = submit(lab, snapshot(store, tmp_path / "model"))
    assert refused.status_code == 400, refused.json()
    assert f"(SIMRUN_LOCAL_PACKAGE_ROOTS: {plugins})" in refused.json()["detail"]
    assert Run.objects.count() == 1


def test_a_sources_entry_no_dependency_uses_is_never_read(
    lab: Lab, store: Path, tmp_path: Path
) -> None:
    """An unused entry names a path that does not exist and one outside: neither is read,
    nor refused; the used one, inside the snapshot, is installed."""
    secret = secrets(tmp_path)
    sources = (
        "plug = { path = 'plugin' }\n"
        "ghost = { path = '/no/such/place' }\n"
        f"Unused_Secret = {{ path = '{secret}' }}\n"
    )
    digest = snapshot(store, model_with(tmp_path, pyproject(["plug>=0"], sources)))

    response = submit(lab, digest)

    assert response.status_code == 201, response.json()
    digest = tree_digest(tmp_path / "model" / "plugin")
    assert installed(Run.objects.get()) == [{"name": "plug", "digest": digest}]


def test_a_package_replaced_by_a_link_in_the_snapshot_is_400_even_to_a_folder_inside(
    lab: Lab, store: Path, tmp_path: Path
) -> None:
    text = pyproject(["plug"], "plug = { path = 'alias' }\n")
    digest = snapshot(store, model_with(tmp_path, text))
    os.symlink("plugin", store / "snapshots" / digest / "alias")

    response = submit(lab, digest)

    assert response.status_code == 400, response.json()
    assert response.json()["detail"] == (
        "sources: the model's pyproject.toml: the local package plug (alias): alias is no "
        "directory or file in the model directory (a link is never followed)"
    )
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("limit", "value", "files", "size", "said"),
    [
        ("SIMRUN_UPLOAD_MAX_FILES", 4, 5, 1, "more than 4 files and directories"),
        ("SIMRUN_LOCAL_PACKAGE_MAX_BYTES", 100, 1, 101, "more than 100 bytes"),
    ],
)
def test_local_packages_larger_than_the_limits_are_400_naming_the_limit(
    lab: Lab,
    store: Path,
    tmp_path: Path,
    settings: Settings,
    limit: str,
    value: int,
    files: int,
    size: int,
    said: str,
) -> None:
    setattr(settings, limit, value)
    model = tmp_path / "model"
    package(model / "plugin", files=files, size=size)
    (model / "pyproject.toml").write_text(pyproject(["plug"], "plug = { path = 'plugin' }\n"))

    response = submit(lab, snapshot(store, model))

    assert response.status_code == 400, response.json()
    detail = response.json()["detail"]
    assert f"the local package plug (plugin) holds {said} ({limit})" in detail
    assert not Run.objects.exists()

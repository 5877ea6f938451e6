"""Environments of models with local packages: their identity follows the packages' files,
and a build installs their current code (never a wheel uv cached for an older edit)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import uv

from cluster.local import venvs
from runs.environments import LOCAL_PACKAGES_FILE, SOURCE_DIR_FILE, model_environment
from runs.local_packages import LocalPackageRefused, LocalPackageRules, local_packages

PLUGIN = """
[build-system]
requires = ["hatchling==1.33.0"]
build-backend = "hatchling.build"

[project]
name = "word-plugin"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["src/word_plugin"]
"""


def model_pyproject(dependency: str, sources: str = "") -> str:
    return (
        '[project]\nname = "word-model"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
        f"dependencies = [{dependency!r}]\n{sources}"
    )


def write_plugin(root: Path, word: str) -> Path:
    (root / "src" / "word_plugin").mkdir(parents=True, exist_ok=True)
    if not (root / "pyproject.toml").exists():  # an edit changes the module only
        (root / "pyproject.toml").write_text(PLUGIN)
    (root / "src" / "word_plugin" / "__init__.py").write_text(f"WORD = {word!r}\n")
    return root


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return venvs.ensure_wheels(tmp_path_factory.mktemp("wheels"))


def word_of(environments: Path, ref: str) -> str:
    python = environments / ref / "bin" / "python"
    done = subprocess.run(
        [python, "-c", "import word_plugin; print(word_plugin.WORD)"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_an_edited_file_url_package_gets_a_new_environment_with_its_new_code(
    tmp_path: Path, wheels: Path
) -> None:
    """Only a module changes (not its pyproject.toml): uv's cache would serve the old wheel."""
    plugin = write_plugin(tmp_path / "plugin", "first")
    model = tmp_path / "model"
    model.mkdir()
    (model / "pyproject.toml").write_text(model_pyproject(f"word-plugin @ {plugin.as_uri()}"))
    environments = tmp_path / "environments"
    rules = LocalPackageRules(roots=(plugin,))  # the operator allows the plugin's directory
    first, context = model_environment(model, local_rules=rules)
    venvs.build_environment(context, first, environments, wheels, rules)
    write_plugin(plugin, "second")
    second, context = model_environment(model, local_rules=rules)
    assert second != first
    venvs.build_environment(context, second, environments, wheels, rules)
    assert (word_of(environments, first), word_of(environments, second)) == ("first", "second")


def test_a_locked_model_with_an_editable_relative_package_builds_from_its_directory(
    tmp_path: Path, wheels: Path
) -> None:
    model = tmp_path / "model"
    write_plugin(model / "plugin", "locked")
    sources = '\n[tool.uv.sources]\nword-plugin = { path = "plugin", editable = true }\n'
    (model / "pyproject.toml").write_text(model_pyproject("word-plugin", sources))
    subprocess.run([uv.find_uv_bin(), "lock", "--offline"], cwd=model, check=True)
    ref, context = model_environment(model)
    assert context[SOURCE_DIR_FILE] == str(model.resolve()).encode()
    venvs.build_environment(context, ref, tmp_path / "environments", wheels)
    assert word_of(tmp_path / "environments", ref) == "locked"


def test_the_identity_follows_the_package_files_not_where_they_lie(tmp_path: Path) -> None:
    one = tmp_path / "one"
    write_plugin(one / "plugin", "same")
    sources = '\n[tool.uv.sources]\nword-plugin = { path = "plugin" }\n'
    (one / "pyproject.toml").write_text(model_pyproject("word-plugin", sources))
    two = tmp_path / "two"
    shutil.copytree(one, two)
    (two / "plugin" / "src" / "word_plugin" / "__pycache__").mkdir()
    (two / "plugin" / "src" / "word_plugin" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    ref_one, context = model_environment(one)
    assert model_environment(two)[0] == ref_one
    assert b"word-plugin" in context[LOCAL_PACKAGES_FILE]
    write_plugin(two / "plugin", "edited")
    assert model_environment(two)[0] != ref_one


def test_a_missing_local_package_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        model_pyproject("word-plugin", '\n[tool.uv.sources]\nword-plugin = { path = "gone" }\n')
    )
    with pytest.raises(LocalPackageRefused) as refused:
        local_packages(tmp_path)
    assert (
        str(refused.value) == "pyproject.toml: the local package word-plugin (gone): gone is no "
        "directory or file in the model directory (a link is never followed)"
    )

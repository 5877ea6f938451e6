"""Plugin code runs only in its environment: a plugin host answers for a type, the process
that asks (the service) imports no plugin module, an edit on disk is answered at the next
question, a plugin installed meanwhile is usable at once, and a plugin that crashes, hangs or
takes all memory is a message naming the type and the plugin while the asker goes on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uv
from pytest_django import Settings

from runs.local_packages import tree_digest
from runs.plans import Node
from runs.plugin_metadata import Environment, environment_at
from runs.services.reuse import copies_differ
from runs.services.submission import create_run
from runs.task_types import registry
from runs.type_refusals import SettingsInvalid
from runs.validation import errors_of
from runs.workflow import WorkflowInvalid
from tests import factories
from tests.plugins import on_path, write_plugin
from tests.waiting import DEADLINE_S

TYPES = """
import os, time
from pydantic import BaseModel, ConfigDict, Field
from simrun_harness.plugin import SplitTaskType

LIMIT = {limit}


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = Field(2, ge=1, le=LIMIT)
    how: str = "fine"


class Tricky(SplitTaskType):
    name = "tricky"
    settings_model = Settings

    def units(self, ctx):
        how = ctx.settings.how
        if how == "crash":
            os._exit(7)
        if how == "hang":
            time.sleep(3600)
        if how == "hog":
            return [bytearray(64 * 2**20) for _ in range(10_000)]
        return list(range(ctx.settings.n))
"""
PLUGIN = "plugin tricky-plugin 0.1 (tricky_types:Tricky)"
ROOT = Path(__file__).resolve().parents[2]


def workflow(settings: str = "{}") -> str:
    return f"name: w\ntasks:\n  - id: t\n    type: tricky\n    settings: {settings}\n"


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[Path]:
    """The plugin's module, on the service's import path as an installed plugin is."""
    root = write_plugin(
        tmp_path / "site",
        package="tricky-plugin",
        modules={"tricky_types": TYPES.format(limit=10)},
        types={"tricky": "tricky_types:Tricky"},
    )
    with on_path(root):
        yield root / "tricky_types.py"


def submit(text: str) -> None:
    nodes = [Node(name="local", cores=2, memory_gb=4)]
    create_run(identity=factories.person(), workflow=text, sources=[], nodes=nodes)


@pytest.mark.django_db
def test_the_service_checks_and_plans_a_plugin_s_type_without_importing_its_module(
    plugin: Path, store: Path
) -> None:
    assert errors_of(workflow("{n: 3}")) == []
    submit(workflow("{n: 3}"))

    assert "tricky_types" not in sys.modules


def test_an_edit_of_the_plugin_on_disk_is_used_at_the_next_validation(plugin: Path) -> None:
    """No restart, no reinstall: the host that loaded the old code is not asked again."""
    assert [str(e) for e in errors_of(workflow("{n: 20}"))] == [
        "task 't': settings.n: Input should be less than or equal to 10"
    ]
    plugin.write_text(TYPES.format(limit=100))

    assert errors_of(workflow("{n: 20}")) == []


@pytest.mark.django_db
def test_an_edit_of_units_is_used_at_the_next_submission(plugin: Path, store: Path) -> None:
    """The edit keeps the file's size, inode and modification time, as two saves within a
    filesystem's timestamp granularity do: only its bytes tell it apart. (The time is set in
    the future, so every read of the file here comes within that granularity.)"""
    ahead = time.time_ns() + 3600 * 10**9
    os.utime(plugin, ns=(ahead, ahead))
    submit(workflow())
    edited = TYPES.format(limit=10).replace(
        "return list(range(ctx.settings.n))", 'raise ValueError("edited to fail")'
    )
    assert len(edited) == len(plugin.read_text())
    plugin.write_text(edited)
    os.utime(plugin, ns=(ahead, ahead))

    with pytest.raises(WorkflowInvalid) as refused:
        submit(workflow())

    assert str(refused.value) == (
        f"task 't': settings: units(): ValueError: edited to fail (raised by {PLUGIN})"
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("crash", "its plugin host failed while listing its units: it ended (exit 7)"),
        ("hang", "its plugin host failed while listing its units: it did not answer within 2 s"),
        ("hog", "units(): ran out of memory"),
    ],
    ids=["crash", "hang", "hog"],
)
def test_a_plugin_that_crashes_hangs_or_takes_all_memory_is_a_message_naming_it(
    plugin: Path, store: Path, settings: Settings, how: str, says: str
) -> None:
    settings.SIMRUN_PLUGIN_HOST_TIMEOUT_S = 2 if how == "hang" else DEADLINE_S
    settings.SIMRUN_PLUGIN_HOST_MEMORY_MB = 512

    with pytest.raises(WorkflowInvalid) as refused:
        submit(workflow(f"{{how: {how}}}"))

    [error] = refused.value.errors
    assert error.task == "t"
    assert "tricky" in error.message and "tricky-plugin" in error.message
    assert says in error.message
    submit(workflow("{n: 3}"))  # the next question is answered: nothing here was harmed


def test_a_plugin_installed_in_an_environment_after_its_types_were_read_is_usable_at_once(
    tmp_path: Path,
) -> None:
    """`uv pip install -e` of a plugin into an environment whose types were already listed:
    its `.pth` puts the plugin's directory on the path of processes started afterwards only,
    which a plugin host is."""
    environments = tmp_path / "environments"
    venv = environments / "model"
    subprocess.run([uv.find_uv_bin(), "venv", "-q", "--python", sys.executable, venv], check=True)
    [site] = (venv / "lib").glob("python*/site-packages")
    service_site = next(p for p in sys.path if p.endswith("site-packages"))
    (site / "service.pth").write_text(f"import site; site.addsitedir({service_site!r})\n")
    env = environment_at(environments, "model")
    assert env is not None and "tricky" not in registry(env)
    project = tmp_path / "tricky-plugin"
    (project / "src" / "tricky_types").mkdir(parents=True)
    (project / "src" / "tricky_types" / "__init__.py").write_text(TYPES.format(limit=10))
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling==1.33.0"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "tricky-plugin"\nversion = "0.1"\n'
        '[project.entry-points."simrun.task_types"]\ntricky = "tricky_types:Tricky"\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/tricky_types"]\n'
    )
    python = venv / "bin" / "python"
    install = [uv.find_uv_bin(), "pip", "install", "-q", "--python", python, "-e", project]
    subprocess.run(install, check=True)

    types = registry(env)
    assert types.check("tricky", {"n": 3}) == {"n": 3, "how": "fine"}
    with pytest.raises(SettingsInvalid):
        types.check("tricky", {"n": 30})


@pytest.mark.django_db
def test_a_type_that_needs_a_model_submitted_without_one_names_the_flag(store: Path) -> None:
    """`sbml_scan` refuses to list units without a model snapshot: the refusal says which
    flag gives one."""
    text = (ROOT / "examples" / "workflows" / "repressilator.yaml").read_text()

    with pytest.raises(WorkflowInvalid) as refused:
        submit(text)

    [error] = [e for e in refused.value.errors if e.task == "scan"]
    assert "sbml_scan needs a model snapshot" in error.message
    assert "`simrun submit --source DIR`" in error.message


def test_a_model_environment_whose_copy_of_the_plugin_differs_from_the_service_s_is_named(
    plugin: Path, tmp_path: Path
) -> None:
    """The service checked the settings with its copy; the run's environment has another
    (an edit since `plugin install`): its reuse notes say so, naming the plugin and both
    digests. The same code in both says nothing."""
    other = write_plugin(
        tmp_path / "model-site",
        package="tricky-plugin",
        modules={"tricky_types": TYPES.format(limit=20)},
        types={"tricky": "tricky_types:Tricky"},
    )
    model = Environment(name="model", python=sys.executable, site=(str(other),))

    [note] = copies_differ(registry(model), {"tricky", "command"}).values()

    assert note.startswith(f"the service's copy of {PLUGIN} (")
    assert "differs from the model environment's (" in note
    assert note.endswith(
        "the settings were checked and the units listed again with the model environment's"
    )
    (other / "tricky_types.py").write_text(TYPES.format(limit=10))
    assert copies_differ(registry(model), {"tricky"}) == {}


def test_on_a_cluster_a_model_whose_local_copy_of_the_plugin_differs_is_named(
    tmp_path: Path,
) -> None:
    """Where the model's environment is an image, the service lists with its own copy, an
    editable install: the model's local package of that name with other files is named."""
    project = tmp_path / "tricky-plugin"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "tricky-plugin"\n')
    (project / "tricky_types.py").write_text(TYPES.format(limit=10))
    site = write_plugin(
        tmp_path / "site",
        package="tricky-plugin",
        modules={},
        types={"tricky": "tricky_types:Tricky"},
    )
    direct = {"url": project.as_uri(), "dir_info": {"editable": True}}
    (site / "tricky_plugin-0.1.dist-info" / "direct_url.json").write_text(json.dumps(direct))
    with on_path(site):
        same = [{"name": "tricky_plugin", "digest": tree_digest(project)}]
        other = [{"name": "Tricky.Plugin", "digest": "0" * 64}]
        unrelated = [{"name": "another-plugin", "digest": "0" * 64}]

        assert copies_differ(registry(), {"tricky"}, same) == {}
        assert copies_differ(registry(), {"tricky"}, unrelated) == {}
        [note] = copies_differ(registry(), {"tricky", "command"}, other).values()

    assert note.startswith(f"the service's copy of {PLUGIN} ({tree_digest(project)[:12]})")
    assert "differs from the model environment's (000000000000)" in note
    assert note.endswith(
        "the settings were checked and the units listed with the service's copy, the pods "
        "run the model environment's"
    )

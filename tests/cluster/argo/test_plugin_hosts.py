"""B14: on a cluster a run's units are listed in the model's environment, its image: a plugin host
in a pod of that image answers (docs/plugins.md, "Where plugin code runs"). Against the
simulator, whose kubelet runs an image's containers with the image's own copy of a plugin
(`Kubelet.image_paths`) in front of the test process's environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytest_django import Settings

from cluster.argo.images import environment_image
from cluster.argo.plugin_hosts import HOST_LABEL
from runs.environments import model_environment
from runs.models import Run, Snapshot
from runs.services.submission import create_run, submit_run
from runs.snapshots import snapshot_directory
from runs.states import RunState
from runs.store import store, task_paths
from simrun_harness.reuse import UNITS_LIST_FILE
from tests import factories
from tests.cluster.argo.lab import Lab
from tests.plugins import on_path, write_plugin
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db

TYPES = """
import os, time
from pydantic import BaseModel, ConfigDict
from simrun_harness.plugin import SplitTaskType, UnsplitTaskType

COPY = {copy!r}


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = 2
    how: str = "fine"


class Tricky(SplitTaskType):
    name = "tricky"
    settings_model = Settings

    def units(self, ctx):
        if COPY == "image" and ctx.settings.how == "hang":
            time.sleep(3600)
        if COPY == "image" and ctx.settings.how == "crash":
            print("the image's copy gives up")
            os._exit(7)
        per = 2 if COPY == "image" else 1
        return [{{"copy": COPY, "i": i}} for i in range(ctx.settings.n * per)]


class Once(UnsplitTaskType):
    name = "once"
    settings_model = Settings

    def run(self, ctx, out):
        pass
"""
PLUGIN = "plugin tricky-plugin 0.1 (tricky_types:Tricky)"


def plugin_copy(root: Path, copy: str) -> Path:
    return write_plugin(
        root,
        package="tricky-plugin",
        modules={"tricky_types": TYPES.format(copy=copy)},
        types={"tricky": "tricky_types:Tricky", "once": "tricky_types:Once"},
    )


def submitted(lab: Lab, tmp_path: Path, settings: dict[str, Any], type_name: str = "tricky") -> Run:
    """A run of one `tricky` task of a model with an environment of its own (an image whose
    copy of the plugin is not the service's), created and submitted as the service does."""
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "pyproject.toml").write_text('[project]\nname = "model"\nversion = "0.1"\n')
    info = snapshot_directory(store(), model)
    Snapshot.objects.get_or_create(digest=info.digest, name="model")
    ref, _ = model_environment(store().snapshot(info.digest))
    run_dir = f"{len(Run.objects.all())}"
    image = environment_image(ref, lab.config)
    assert lab.sim is not None
    lab.sim.kubelet.image_paths[image] = [plugin_copy(tmp_path / "image" / run_dir, "image")]
    with on_path(plugin_copy(tmp_path / "service" / run_dir, "service")):
        run, _ = create_run(
            identity=factories.person(),
            workflow={"name": "w", "tasks": [{"id": "t", "type": type_name, "settings": settings}]},
            sources=[info.digest],
            nodes=lab.backend.nodes(),
        )
        if type_name == "tricky":  # the service's copy planned it
            assert run.tasks.get().units_total == settings["n"]
        submit_run(run_id=run.pk, backend=lab.backend)
    return Run.objects.get(pk=run.pk)


def host_pods_gone(lab: Lab) -> bool:
    assert lab.sim is not None
    return not lab.sim.pods(where=lambda p: HOST_LABEL in (p["metadata"].get("labels") or {}))


def test_the_units_are_listed_with_the_image_s_copy_and_the_difference_is_named(
    sim_lab: Lab, tmp_path: Path
) -> None:
    run = submitted(sim_lab, tmp_path, {"n": 3})

    assert run.state == RunState.QUEUED, run.message
    task = run.tasks.get()
    assert task.units_total == 6
    listed = (task_paths(run.id, "t").root / UNITS_LIST_FILE).read_text().splitlines()
    assert listed == [f'{{"copy":"image","i":{i}}}' for i in range(6)]
    note = task.reuse_note["copies"]
    assert note.startswith(f"the service's copy of {PLUGIN} (")
    assert "differs from the model environment's, tricky-plugin 0.1 (" in note
    assert wait_for(lambda: host_pods_gone(sim_lab), timeout=30)


def test_which_code_a_plugin_is_in_an_image_is_asked_once_per_image(
    sim_lab: Lab, tmp_path: Path
) -> None:
    """A run of unsplit tasks asks the image only which code its plugin is there, and a run
    of the same image finds the answer kept: it starts no pod, and names the copy all the
    same."""
    assert sim_lab.sim is not None
    first = submitted(sim_lab, tmp_path, {}, type_name="once")
    jobs = [r for r in sim_lab.sim.access_log if (r.verb, r.resource) == ("create", "jobs")]

    again = submitted(sim_lab, tmp_path, {}, type_name="once")

    later = [r for r in sim_lab.sim.access_log if (r.verb, r.resource) == ("create", "jobs")]
    assert later == jobs
    for run in (first, again):
        assert run.state == RunState.QUEUED, run.message
        assert "differs from the model environment's" in run.tasks.get().reuse_note["copies"]


def test_a_submission_asks_the_image_its_units_in_one_pod(sim_lab: Lab, tmp_path: Path) -> None:
    """The units questions asked before the tasks are keyed are the very ones keying asks:
    a split task's submission of a built image starts one plugin host, not a second one
    to ask its units again."""
    assert sim_lab.sim is not None
    submitted(sim_lab, tmp_path, {}, type_name="once")  # the image built, its code known
    before = [r for r in sim_lab.sim.access_log if (r.verb, r.resource) == ("create", "jobs")]

    run = submitted(sim_lab, tmp_path, {"n": 2})

    after = [r for r in sim_lab.sim.access_log if (r.verb, r.resource) == ("create", "jobs")]
    assert run.state == RunState.QUEUED, run.message
    assert run.tasks.get().units_total == 4
    assert len(after) - len(before) == 1


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("hang", "its pod did not answer within 3 s and was deleted (its pod was Running)"),
        ("crash", "its pod failed without answering:\nthe image's copy gives up"),
        ("unscheduled", "within 3 s and was deleted (its pod was Pending: 0/3 nodes are"),
    ],
)
def test_a_host_pod_that_hangs_fails_or_never_starts_fails_the_submission_naming_the_plugin(
    sim_lab: Lab, tmp_path: Path, settings: Settings, how: str, said: str
) -> None:
    settings.SIMRUN_PLUGIN_POD_TIMEOUT_S = 3.0
    if how == "unscheduled":  # a pod that asks more memory than any node has
        settings.SIMRUN_PLUGIN_HOST_MEMORY_MB = 64 * 1024

    run = submitted(sim_lab, tmp_path, {"n": 3, "how": how})

    assert run.state == RunState.FAILED
    assert run.message.startswith(
        f"submission failed: task type 'tricky' of {PLUGIN}: the plugin host in the model's "
        "environment (image "
    )
    assert said in run.message
    assert wait_for(lambda: host_pods_gone(sim_lab), timeout=30)

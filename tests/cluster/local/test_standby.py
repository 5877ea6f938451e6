"""A pod handed to a standby behaves as a fresh one, and never runs a stale plugin.

Each test runs on a backend that keeps standbys (`standby=1`, its loop running) for the
`probe` environment (tests/cluster/local/probe_environment.py); where it makes sense the same
test runs with standbys off too, so what is asserted is what a fresh process does.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from cluster.local.atomic_files import read_json
from cluster.local.attempts import read_attempt
from cluster.local.backend import LocalBackend
from runs.ports import PodPhase, WorkflowPhase
from simrun_harness.report import read_report
from tests.cluster.local.builders import launch, shape, split_task
from tests.cluster.local.probe_environment import Probe, probe_environment
from tests.cluster.local.standbys import (
    POD,
    adopted,
    attempt_dir,
    finish,
    imported_standby,
    run_probe,
    seen,
    standby_processes,
    want_standby,
)
from tests.cluster.local.test_harness_pods import write_task
from tests.waiting import wait_for


@pytest.fixture
def probe(store: Path, tmp_path: Path) -> Probe:
    return probe_environment(store / "environments", tmp_path / "probe-plugin")


@pytest.fixture
def make_looping(
    make_backend: Callable[..., LocalBackend], store: Path
) -> Iterator[Callable[[int], LocalBackend]]:
    """A backend whose loop runs, keeping `standby` environments' standbys."""

    def make(standby: int) -> LocalBackend:
        backend = make_backend(standby=standby, memory_gb=3)
        backend.subscribe(lambda: None)
        if standby:
            want_standby(backend, "probe")
            imported_standby(backend, "probe")
        return backend

    yield make
    for proc in standby_processes(store):  # whatever a failing test left
        with contextlib.suppress(psutil.Error):  # it may end since it was listed
            proc.kill()


@pytest.fixture(params=[1, 0], ids=["standby", "fresh"])
def looping(
    request: pytest.FixtureRequest, make_looping: Callable[[int], LocalBackend], probe: Probe
) -> LocalBackend:
    return make_looping(request.param)


def python_environ(python: Path, env: dict[str, str]) -> dict[str, str]:
    """`os.environ` of a Python process started with `env` (Python may add to it: the locale
    it coerces when there is none)."""
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    out = subprocess.run([str(python), "-c", code], env=env, capture_output=True, check=True)
    found: dict[str, str] = json.loads(out.stdout)
    return found


def assert_as_fresh(backend: LocalBackend, run_id: str) -> None:
    """Each unit of the run saw what a fresh process of its attempt sees: the environment
    Python makes of the attempt's plus what the plugin's import set (in `os.environ` and in
    a process the unit starts), the attempt's directory, the script's name as its process
    name and argv[0], its directory first on the import path."""
    spec = read_json(attempt_dir(backend, run_id) / "attempt.json")
    assert spec is not None
    bin_dir = Path(spec["env"]["PATH"].split(os.pathsep)[0])
    expected = {**python_environ(bin_dir / "python", spec["env"]), "PROBE_IMPORTED": "first"}
    for unit in seen(backend, run_id):
        assert unit["env"] == expected
        assert unit["child_env"] == expected
        assert unit["cwd"] == str(Path(spec["cwd"]).resolve())
        assert (unit["comm"], unit["argv0"]) == ("simrun-worker", str(bin_dir / "simrun-worker"))
        assert unit["path0"] == str(bin_dir)
        assert (unit["word"], unit["data"]) == ("first", "data")


def test_the_pod_sees_its_attempt_s_environment_directory_and_name(looping: LocalBackend) -> None:
    name = run_probe(looping, "r1")
    assert finish(looping, name) is WorkflowPhase.SUCCEEDED
    assert adopted(looping, "r1") is bool(looping._standbys)
    assert_as_fresh(looping, "r1")


@pytest.mark.parametrize("standby", [1, 0], ids=["standby", "fresh"])
def test_a_pod_without_a_locale_has_the_one_python_gives_a_fresh_process(
    make_looping: Callable[[int], LocalBackend],
    probe: Probe,
    monkeypatch: pytest.MonkeyPatch,
    standby: int,
) -> None:
    """No LANG, LC_ALL, LC_CTYPE (a service started by systemd, say): Python sets LC_CTYPE in
    its own environment when it starts (PEP 538), which the unit and its children inherit;
    a standby started the same way hands it on."""
    for variable in ("LANG", "LC_ALL", "LC_CTYPE"):
        monkeypatch.delenv(variable, raising=False)
    backend = make_looping(standby)
    name = run_probe(backend, "r1")
    assert finish(backend, name) is WorkflowPhase.SUCCEEDED
    assert adopted(backend, "r1") is bool(standby)
    assert {u["env"].get("LC_CTYPE") for u in seen(backend, "r1")} != {None}
    assert_as_fresh(backend, "r1")


def test_a_failing_unit_exits_3_with_its_report_and_log(looping: LocalBackend) -> None:
    name = run_probe(looping, "r1", fail=True)
    assert finish(looping, name) is WorkflowPhase.FAILED
    assert adopted(looping, "r1") is bool(looping._standbys)
    status = looping.status(name)
    assert [f.exit_code for f in status.failures[POD]] == [3]
    report = read_report(looping.store.run("r1").task("p").reports / f"{POD}-0.json")
    assert (report.exit_code, report.worker, report.attempt) == (3, POD, 0)
    assert report.memory_limit_gb == 0.75
    assert report.error is not None and "fails on purpose" in report.error.message
    [log] = looping.logs(name, "p")
    assert "RuntimeError: the probe fails on purpose" in log.text
    assert f"{POD} exits 3" in log.text


def test_a_cancelled_pod_gets_sigterm_and_exits_143(looping: LocalBackend) -> None:
    """The supervisor forwards SIGTERM to the pod's group: the harness gives its claims back
    and exits 143, as on a preemption."""
    name = run_probe(looping, "r1", seconds=60)
    wait_for(lambda: "runs 1 processes" in looping.logs(name, "p")[0].text, timeout=30)
    wait_for(lambda: (attempt_dir(looping, "r1") / "child.json").exists())
    assert adopted(looping, "r1") is bool(looping._standbys)
    looping.cancel(name)
    wait_for(lambda: looping.status(name).pods[POD].phase is PodPhase.FAILED, timeout=30)
    assert looping.status(name).pods[POD].exit_code == 143
    [log] = looping.logs(name, "p")
    assert "signal 15, giving back" in log.text


def test_a_pod_over_its_memory_limit_is_killed_by_its_supervisor(looping: LocalBackend) -> None:
    """The supervisor measures the pod's process tree (here its main process holds 1000 MiB,
    over the pod's 0.75 GiB) and kills it: OOMKilled, exit 137 (then it is retried)."""
    name = run_probe(looping, "r1", hold_mb=1000)
    failures = wait_for(lambda: looping.status(name).failures.get(POD) or [], timeout=60)
    assert adopted(looping, "r1") is bool(looping._standbys)
    assert [(f.attempt, f.exit_code, f.oom_killed) for f in failures] == [(0, 137, True)]
    attempt = read_attempt(attempt_dir(looping, "r1"))
    assert attempt is not None and attempt.child is not None
    assert not attempt.child.alive()
    looping.cancel(name)


EDITS = {
    "module": ("second", "data", "helper"),
    "data": ("first", "changed", "helper"),
    "helper": ("first", "data", "edited!"),
    "install": ("first", "data", "helper"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_plugin_changed_after_the_standby_imported_it_runs_in_a_fresh_process(
    make_looping: Callable[[int], LocalBackend], probe: Probe, edit: str
) -> None:
    """Edited in place — its module, a file it reads at import (it is installed from a
    directory, editable), a module of the environment it imports — or another distribution
    installed: the standby says it is stale and the pod's process is a fresh one, which
    imports the current code. The next standby imports that and gets the next pod."""
    backend = make_looping(1)
    if edit == "module":
        probe.write("second")
    elif edit == "data":
        probe.data.write_text("changed")
    elif edit == "helper":
        # another size: Python takes a module's bytecode for current when the source's size
        # and its modification time in whole seconds are those it was compiled from
        probe.helper.write_text('HELPER = "edited!"\n')
    else:
        (probe.site_packages / "other-1.0.dist-info").mkdir()
    name = run_probe(backend, "r1")
    assert finish(backend, name) is WorkflowPhase.SUCCEEDED
    assert not adopted(backend, "r1")
    said = (attempt_dir(backend, "r1") / "supervisor.log").read_text()
    assert "a fresh process, not the standby: stale:" in said
    expected = {EDITS[edit]}
    assert {(u["word"], u["data"], u["helper"]) for u in seen(backend, "r1")} == expected
    imported_standby(backend, "probe")
    name = run_probe(backend, "r2")
    assert finish(backend, name) is WorkflowPhase.SUCCEEDED
    assert adopted(backend, "r2")
    assert {(u["word"], u["data"], u["helper"]) for u in seen(backend, "r2")} == expected


def test_a_pod_whose_task_sets_its_own_variables_starts_fresh(
    make_looping: Callable[[int], LocalBackend], probe: Probe
) -> None:
    """A variable a library may read at import (OMP_NUM_THREADS …) is not the standby's: the
    pod starts fresh rather than run with imports made without it."""
    backend = make_looping(1)
    write_task(backend, "r1", "p", "probe")
    task = split_task("p", 1, task_type="probe", coordinator_merges=True, pod=shape())
    task = replace(task, env={"OMP_NUM_THREADS": "1"})
    name = backend.submit(launch("r1", task, environment="probe"))
    assert finish(backend, name) is WorkflowPhase.SUCCEEDED
    assert not adopted(backend, "r1")
    assert {u["env"]["OMP_NUM_THREADS"] for u in seen(backend, "r1")} == {"1"}
    assert psutil.pid_exists(int(imported_standby(backend, "probe").pid))

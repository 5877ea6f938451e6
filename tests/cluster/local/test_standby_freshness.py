"""A standby never runs code older than what a fresh process would import: not after an edit
made while it imports (held at the probe plugin's gate), not from bytecode Python takes for
current by its time in seconds and size, not past a `.pth` that points elsewhere now, not with
a SIMRUN_* variable its imports read before there was one.
"""

from __future__ import annotations

import contextlib
import os
import py_compile
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from cluster.local.backend import LocalBackend
from cluster.local.standby_files import FAILED_FILE
from runs.ports import WorkflowPhase
from tests.cluster.local.probe_environment import Probe, probe_environment
from tests.cluster.local.standbys import (
    adopted,
    attempt_dir,
    finish,
    held_at_the_gate,
    imported_standby,
    run_probe,
    seen,
    standby_dir,
    standby_processes,
    want_standby,
)
from tests.waiting import wait_for

ORIGINAL = ("first", "data", "helper", [])


@pytest.fixture
def probe(store: Path, tmp_path: Path) -> Probe:
    return probe_environment(store / "environments", tmp_path / "probe-plugin")


@pytest.fixture
def make_looping(
    make_backend: Callable[..., LocalBackend], store: Path
) -> Iterator[Callable[[int], LocalBackend]]:
    """A backend whose loop runs, keeping `standby` environments' standbys (none started
    until a test wants one: `want_standby`)."""

    def make(standby: int) -> LocalBackend:
        backend = make_backend(standby=standby, memory_gb=3)
        backend.subscribe(lambda: None)
        return backend

    yield make
    for proc in standby_processes(store):  # whatever a failing test left
        with contextlib.suppress(psutil.Error):
            proc.kill()


def what_units_saw(backend: LocalBackend, run_id: str) -> set[tuple[str, str, str, str]]:
    return {
        (u["word"], u["data"], u["helper"], ",".join(u["modules"])) for u in seen(backend, run_id)
    }


def expect(word: str, data: str, helper: str, modules: list[str]) -> set[tuple[str, str, str, str]]:
    return {(word, data, helper, ",".join(modules))}


def same_size_same_times(path: Path, text: str) -> None:
    """Rewrite `path` in place with `text` of the same size and put its modification time
    back (`cp -p`, `rsync -t`; or two saves within the same tick of a coarse clock)."""
    before = path.stat()
    assert len(text.encode()) == before.st_size
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def edit(probe: Probe, what: str) -> tuple[str, str, str, list[str]]:
    """Change the plugin or its environment; what a fresh process then sees."""
    if what == "module":
        same_size_same_times(probe.module, probe.module.read_text().replace("first", "fresh"))
        return ("fresh", "data", "helper", [])
    if what == "data":
        probe.data.write_text("atad")
        return ("first", "atad", "helper", [])
    if what == "helper":  # a module of the environment (site-packages) the plugin imports
        probe.helper.write_text('HELPER = "edited!"\n')  # another size: its bytecode is stale
        return ("first", "data", "edited!", [])
    if what == "new module":  # the plugin lists its submodules when it is imported
        (probe.module.parent / "extra.py").write_text("")
        return ("first", "data", "helper", ["extra"])
    if what == "install":  # another distribution installed
        (probe.site_packages / "other-1.0.dist-info").mkdir()
        return ORIGINAL
    raise AssertionError(what)


def assert_fresh(
    backend: LocalBackend, run_id: str, expected: tuple[str, str, str, list[str]]
) -> None:
    """The run's pod ran in a fresh process because the standby was stale, and saw `expected`."""
    name = run_probe(backend, run_id)
    assert finish(backend, name) is WorkflowPhase.SUCCEEDED
    assert not adopted(backend, run_id)
    said = (attempt_dir(backend, run_id) / "supervisor.log").read_text()
    assert "a fresh process, not the standby: stale:" in said
    assert what_units_saw(backend, run_id) == expect(*expected)


@pytest.mark.parametrize("what", ["module", "data", "helper", "new module", "install"])
def test_an_edit_made_while_the_standby_imports_is_not_missed(
    make_looping: Callable[[int], LocalBackend], probe: Probe, what: str
) -> None:
    """The standby is held inside the plugin's import — the plugin's module compiled and
    running, its data file and the environment's module it imports read — while the plugin,
    its environment or its directory change: it is stale when handed its attempt (its stamps
    were taken before anything was read), and the fresh process runs the current code."""
    backend = make_looping(1)
    with held_at_the_gate(probe) as held:
        want_standby(backend, "probe")
        held()
        expected = edit(probe, what)
    imported_standby(backend, "probe")
    assert_fresh(backend, "r1", expected)
    imported_standby(backend, "probe")  # the next one imports the current code and is used
    name = run_probe(backend, "r2")
    assert finish(backend, name) is WorkflowPhase.SUCCEEDED
    assert adopted(backend, "r2")
    assert what_units_saw(backend, "r2") == expect(*expected)


def test_a_pth_file_pointed_elsewhere_is_stale(
    make_looping: Callable[[int], LocalBackend], probe: Probe, tmp_path: Path
) -> None:
    """The plugin's `.pth` edited in place to put another copy of it on the import path (its
    directory, site-packages, does not change)."""
    backend = make_looping(1)
    want_standby(backend, "probe")
    imported_standby(backend, "probe")
    moved = Probe(probe.name, probe.root, tmp_path / "moved-plugin")
    shutil.copytree(probe.project, moved.project)
    moved.write("moved")
    pth = probe.site_packages / "probe_plugin.pth"
    pth.write_text(f"{moved.project / 'src'}\n")
    assert_fresh(backend, "r1", ("moved", "data", "helper", []))


def test_a_file_linked_into_another_environment_leaves_the_standby_fresh(
    make_looping: Callable[[int], LocalBackend], probe: Probe, tmp_path: Path
) -> None:
    """uv hard-links the files of its cache into every environment it installs: another
    environment's install gives the files this standby imported (a module of its environment,
    the plugin's own) one more link, which moves their change time and nothing else. The
    standby still runs the attempt."""
    backend = make_looping(1)
    want_standby(backend, "probe")
    imported_standby(backend, "probe")
    other = tmp_path / "other-environment"
    other.mkdir()
    for index, path in enumerate([probe.helper, probe.module, probe.site_packages / "service.pth"]):
        os.link(path, other / f"{index}-{path.name}")
    name = run_probe(backend, "r1")
    assert finish(backend, name) is WorkflowPhase.SUCCEEDED
    said = (attempt_dir(backend, "r1") / "supervisor.log").read_text()
    assert adopted(backend, "r1"), said
    assert what_units_saw(backend, "r1") == expect(*ORIGINAL)


@pytest.mark.parametrize("standby", [1, 0], ids=["standby", "fresh"])
def test_bytecode_of_the_same_second_and_size_is_not_taken_for_the_plugin_s_source(
    make_looping: Callable[[int], LocalBackend], probe: Probe, standby: int
) -> None:
    """The plugin's bytecode was compiled (by anyone: a shell, an earlier pod) from its
    previous content, which had the same size and modification time in seconds: Python
    alone would run that. A plugin installed from a directory is checked by the hash of its
    source instead, in a standby as in a fresh pod."""
    py_compile.compile(
        str(probe.module), invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP
    )
    same_size_same_times(probe.module, probe.module.read_text().replace("first", "fresh"))
    backend = make_looping(standby)
    if standby:
        want_standby(backend, "probe")
        imported_standby(backend, "probe")
    name = run_probe(backend, "r1")
    assert finish(backend, name) is WorkflowPhase.SUCCEEDED
    assert adopted(backend, "r1") is bool(standby)
    assert what_units_saw(backend, "r1") == expect("fresh", "data", "helper", [])


READS_RUN = 'os.environ["PROBE_RUN"] = os.environ.get("SIMRUN_RUN", "none")'


def test_a_plugin_that_reads_an_attempt_variable_at_import_gets_no_standby(
    make_looping: Callable[[int], LocalBackend], probe: Probe
) -> None:
    """A standby has no SIMRUN_* variables while it imports: one whose imports looked one up
    says so and ends (`failed`: none is started again for a while); its pods run fresh and
    the plugin reads the attempt's value."""
    probe.write("first", extra=READS_RUN)
    backend = make_looping(1)
    want_standby(backend, "probe")
    failed = standby_dir(backend, "probe") / FAILED_FILE
    why = "its imports read SIMRUN_RUN, which only an attempt has"
    wait_for(lambda: failed.exists() and why in failed.read_text(), timeout=60, what=why)
    name = run_probe(backend, "r1")
    assert finish(backend, name) is WorkflowPhase.SUCCEEDED
    assert not adopted(backend, "r1")
    assert {u["env"]["PROBE_RUN"] for u in seen(backend, "r1")} == {"r1"}


def test_an_attempt_claimed_while_the_standby_imports_a_plugin_that_reads_one_runs_fresh(
    make_looping: Callable[[int], LocalBackend], probe: Probe
) -> None:
    probe.write("first", extra=READS_RUN)
    backend = make_looping(1)
    with held_at_the_gate(probe) as held:
        want_standby(backend, "probe")
        held()
        name = run_probe(backend, "r1")  # claims it: the attempt waits for its imports
        wait_for((attempt_dir(backend, "r1") / "supervisor.json").exists)
    assert finish(backend, name) is WorkflowPhase.SUCCEEDED
    assert not adopted(backend, "r1")
    said = (attempt_dir(backend, "r1") / "supervisor.log").read_text()
    assert "not the standby: its imports read SIMRUN_RUN" in said
    assert {u["env"]["PROBE_RUN"] for u in seen(backend, "r1")} == {"r1"}

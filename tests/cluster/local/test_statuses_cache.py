"""The cache of run statuses: what a read watches, when it is trusted, when it is read again.

Gaps found by mutation testing (docs/testing.md): the tests of `test_statuses.py` check the
statuses read through a backend, not how often a run's files were read, nor which directories
a read watches. Here the runs are files written by hand (no backend, no process) and the
directories' times are set, so no test depends on the clock's grain.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from cluster.local import statuses as statuses_module
from cluster.local.attempts import Attempt
from cluster.local.dag import PodView
from cluster.local.launches import PodSpec
from cluster.local.run_files import CANCELLED, RunFiles
from cluster.local.statuses import MISSING, RACY_S, RunStatuses, Signature, _Listing, watched
from runs.plans import Node
from runs.ports import BackendStatus, PodPhase, RunLaunch, WorkflowPhase
from simrun_harness.layout import StorePaths
from tests.cluster.local.builders import command_task, launch, shape

NODE = Node("n", cores=2, memory_gb=4)
S = 10**9
OLD_NS = 1_000 * S  # a time long before any read


def test_a_signature_is_trusted_when_all_its_times_are_older_than_the_racy_window() -> None:
    signature = Signature(("a", "b"), (7, 5))
    assert RACY_S == 2.0
    assert signature.trusted(7 + 2 * S + 1)
    assert not signature.trusted(7 + 2 * S)
    assert signature.trusted(8, racy_s=0.0)
    assert not signature.trusted(7, racy_s=0.0)
    assert signature.trusted(7 + S // 2 + 1, racy_s=0.5)


def test_a_signature_holds_while_its_directories_keep_their_times(tmp_path: Path) -> None:
    """A directory that appears or whose time changes breaks it; a missing one that stays
    missing does not."""
    here, later = tmp_path / "here", tmp_path / "later"
    here.mkdir()
    os.utime(here, ns=(OLD_NS, OLD_NS))
    signature = Signature((str(here), str(later)), (OLD_NS, MISSING))
    assert signature.holds()
    os.utime(here, ns=(OLD_NS, OLD_NS + 1))
    assert not signature.holds()
    os.utime(here, ns=(OLD_NS, OLD_NS))
    later.mkdir()
    assert not signature.holds()


def view(pod: str, phase: PodPhase, *numbers: int) -> PodView:
    spec = PodSpec(pod, "t", "command", "simrun-agent", 0, pod)
    attempts = tuple(
        Attempt(n, Path(pod, str(n)), 0.0, 1.0, 0.5, None, None, None, None) for n in numbers
    )
    return PodView(spec, attempts, phase)


def test_a_read_watches_only_the_directories_where_its_status_can_still_change() -> None:
    """Nothing of an ended pod, the last attempt of a running one, the directory of a waiting
    one when it has one, and the attempts listed that the read could not see yet."""
    listed = {"ended": [0], "running": [0, 1], "waiting": [], "new": [], "retrying": [0]}
    listed |= {"ahead": [0, 1, 2], "unseen": [0], "gone": [0, 1]}
    listing = _Listing(
        "P",
        {pod: f"P/{pod}" for pod in listed},
        listed,
        {"P": 1} | {f"P/{pod}": 1 for pod in listed} | {"P/new": MISSING},
    )
    views = [
        view("ended", PodPhase.SUCCEEDED, 0),
        view("running", PodPhase.RUNNING, 0, 1),
        view("waiting", PodPhase.QUEUED),
        view("new", PodPhase.QUEUED),
        view("retrying", PodPhase.RETRYING, 0),
        view("ahead", PodPhase.RUNNING, 0),
        view("unseen", PodPhase.QUEUED),
        view("gone", PodPhase.FAILED, 0),
    ]
    assert watched(listing, views) == [
        "P",
        "P/running/1",
        "P/waiting",
        "P/retrying",
        "P/ahead",
        "P/ahead/1",
        "P/ahead/2",
        "P/unseen",
        "P/unseen/0",
        "P/gone",
        "P/gone/1",
    ]


def waiting_run(store: Path, run_id: str = "r1") -> RunFiles:
    """A run whose one pod waits for its first attempt (its directory made), all old."""
    run = RunFiles(StorePaths(store).run(run_id))
    run.pods.mkdir(parents=True)
    run.create(launch(run_id, command_task("t", "pass", pod=shape(cores=64))))
    (run.pods / "t").mkdir()
    age(run)
    return run


def age(run: RunFiles) -> None:
    for directory in (run.pods, run.pods / "t"):
        os.utime(directory, ns=(OLD_NS, OLD_NS))


def statuses_of(run: RunFiles, **options: float) -> RunStatuses:
    def find(name: str) -> RunFiles:
        if name != f"wf-{run.run_id}":
            raise KeyError(name)
        return run

    return RunStatuses(find, **options)


def test_an_old_unchanged_run_is_read_once_and_a_recent_one_at_every_call(
    tmp_path: Path,
) -> None:
    run = waiting_run(tmp_path)
    statuses = statuses_of(run)
    first = statuses.one("wf-r1", NODE)
    assert first.pods["t"].phase is PodPhase.QUEUED
    assert statuses.one("wf-r1", NODE) is first
    assert statuses.reads == 1

    os.utime(run.pods / "t")  # now: inside the racy window
    assert statuses.one("wf-r1", NODE) == first
    assert statuses.one("wf-r1", NODE) == first
    assert statuses.reads == 3


def test_a_changed_run_is_read_again_and_the_same_status_stays_the_same_object(
    tmp_path: Path,
) -> None:
    run = waiting_run(tmp_path)
    statuses = statuses_of(run)
    first = statuses.one("wf-r1", NODE)

    os.utime(run.pods / "t", ns=(OLD_NS, OLD_NS + 1))  # a change that leaves the status
    assert statuses.one("wf-r1", NODE) is first
    assert statuses.reads == 2

    run.mark(CANCELLED)
    age(run)
    os.utime(run.pods, ns=(OLD_NS, OLD_NS + 2))
    after = statuses.one("wf-r1", NODE)
    assert (after.phase, after.pods["t"].phase) == (WorkflowPhase.STOPPED, PodPhase.SKIPPED)
    assert statuses.one("wf-r1", NODE) is after
    assert statuses.reads == 3


def test_a_status_is_read_again_for_another_node_and_after_it_is_forgotten(
    tmp_path: Path,
) -> None:
    run = waiting_run(tmp_path)
    statuses = statuses_of(run)
    statuses.one("wf-r1", NODE)
    bigger = Node("n", cores=64, memory_gb=4)
    assert statuses.one("wf-r1", bigger).pods["t"].phase is PodPhase.QUEUED
    assert statuses.reads == 2
    statuses.forget(["wf-r1"])
    statuses.one("wf-r1", bigger)
    assert statuses.reads == 2
    statuses.forget(["wf-other"])
    statuses.one("wf-r1", bigger)
    assert statuses.reads == 3


def test_a_run_that_is_gone_or_unreadable_is_none_or_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An unknown run is None, a run whose pods directory went away too (and it is
    forgotten: a run of that name made again elsewhere is read from its new files); one
    whose files cannot be read is left out, and the log names it."""
    run = waiting_run(tmp_path / "a")
    found = {"wf-r1": run}
    statuses = RunStatuses(lambda name: found[name])
    assert statuses.read(["wf-r1", "wf-nothing"], NODE)["wf-nothing"] is None
    shutil.rmtree(run.pods)
    with pytest.raises(KeyError, match="wf-r1"):
        statuses.one("wf-r1", NODE)
    assert statuses.read(["wf-r1"], NODE) == {"wf-r1": None}
    found["wf-r1"] = waiting_run(tmp_path / "b")
    assert statuses.one("wf-r1", NODE).pods["t"].phase is PodPhase.QUEUED

    broken = waiting_run(tmp_path, "r2")
    (broken.pods / ".launch.json").write_text("{")
    assert statuses_of(broken).read(["wf-r2"], NODE) == {}
    logged = [r.getMessage() for r in caplog.records if r.name == "cluster.local.statuses"]
    assert logged == ["local backend: cannot read the status of wf-r2"]


def test_a_new_attempt_directory_is_watched_before_its_files_can_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attempt's directory made before its files: a change in it reads the run again.
    The run is found and its launch read once, whatever the reads after."""
    run = waiting_run(tmp_path)
    (run.pods / "t" / "0").mkdir()
    age(run)
    os.utime(run.pods / "t" / "0", ns=(OLD_NS, OLD_NS))
    launches = []
    read_launch = RunFiles.launch

    def counted(self: RunFiles) -> tuple[RunLaunch, float]:
        launches.append(self.run_id)
        return read_launch(self)

    monkeypatch.setattr(RunFiles, "launch", counted)
    found: list[str] = []
    statuses = RunStatuses(lambda name: found.append(name) or run)
    first = statuses.one("wf-r1", NODE)
    assert first.pods["t"].attempts == 0
    assert statuses.one("wf-r1", NODE) is first
    os.utime(run.pods / "t" / "0", ns=(OLD_NS, OLD_NS + 1))
    assert statuses.one("wf-r1", NODE) is first
    assert (statuses.reads, found, launches) == (2, ["wf-r1"], ["r1"])


def passed(run: RunFiles, statuses: RunStatuses, read_ns: int, halted: bool = False) -> None:
    """What a pass of the backend's loop reads of the run, begun at `read_ns`."""
    launch_, _ = run.launch()
    statuses.saw(run, launch_, run.views(launch_), halted=halted, read_ns=read_ns)


def test_a_reusable_status_is_the_last_passs_unless_it_is_too_old(tmp_path: Path) -> None:
    """`latest` answers from a pass begun after `since_ns` (default a minute ago) without
    reading the files, made for the node asked; an older pass, or none, reads them."""
    run = waiting_run(tmp_path)
    statuses = statuses_of(run)
    now = time.time_ns()
    passed(run, statuses, now)

    reused = statuses.read(["wf-r1"], NODE, may_reuse=["wf-r1"])["wf-r1"]
    assert isinstance(reused, BackendStatus) and reused.pods["t"].phase is PodPhase.QUEUED
    assert statuses.latest("wf-r1", NODE, since_ns=now) is reused
    assert statuses.reads == 0
    bigger = Node("n", cores=64, memory_gb=4)
    assert statuses.latest("wf-r1", bigger).pods["t"].message != reused.pods["t"].message
    assert statuses.reads == 0

    assert statuses.latest("wf-r1", NODE, since_ns=now + 1) == reused
    assert statuses.reads == 1
    other = statuses_of(run)
    passed(run, other, now - 61 * S)
    other.latest("wf-r1", NODE)
    assert other.reads == 1


def test_read_answers_each_reusable_name_from_the_pass_made_for_the_node_asked(
    tmp_path: Path,
) -> None:
    """`read` as a tick asks it, every name at once: a name that may reuse the pass gets the
    status the pass made, the same object for an equal node; another node gets a status of
    its own; a name whose time is after the pass, or that may not reuse it, is read."""
    run = waiting_run(tmp_path)
    statuses = statuses_of(run)
    now = time.time_ns()
    passed(run, statuses, now)
    made = statuses.latest("wf-r1", NODE)

    again = statuses.read(["wf-r1"], Node("n", cores=2, memory_gb=4), may_reuse={"wf-r1": 0})
    after_write = statuses.read(["wf-r1"], NODE, may_reuse={"wf-r1": now - 1})

    assert again == after_write == {"wf-r1": made} and again["wf-r1"] is made
    assert after_write["wf-r1"] is made and statuses.reads == 0
    bigger = statuses.read(["wf-r1"], Node("n", cores=64, memory_gb=4), may_reuse={"wf-r1": 0})
    assert bigger["wf-r1"] is not None and bigger["wf-r1"].pods["t"] != made.pods["t"]
    assert statuses.read(["wf-r1"], NODE, may_reuse={"wf-r1": 0}) == {"wf-r1": made}
    assert statuses.reads == 0
    assert statuses.read(["wf-r1"], NODE, may_reuse={"wf-r1": now + 1}) == {"wf-r1": made}
    assert statuses.reads == 1
    statuses.read(["wf-r1"], NODE)
    assert statuses.reads == 1  # the files did not change: the signature of that read holds
    assert statuses.read(["wf-r1", "wf-gone"], NODE, may_reuse={"wf-r1": 0, "wf-gone": 0}) == {
        "wf-r1": made,
        "wf-gone": None,
    }


def test_a_pass_replaces_only_an_older_read_and_makes_the_status_asked_for(
    tmp_path: Path,
) -> None:
    """A pass that began before the entry's read leaves it; a newer one replaces it, with
    its status made at once for the node asked before (the same object while equal)."""
    run = waiting_run(tmp_path)
    statuses = statuses_of(run)
    passed(run, statuses, OLD_NS)
    first = statuses.latest("wf-r1", NODE, since_ns=0)
    passed(run, statuses, OLD_NS, halted=True)  # not newer: ignored
    assert statuses.latest("wf-r1", NODE, since_ns=0) is first
    passed(run, statuses, OLD_NS + 1)
    assert statuses.latest("wf-r1", NODE, since_ns=0) is first
    passed(run, statuses, OLD_NS + 2, halted=True)
    assert statuses.latest("wf-r1", NODE, since_ns=0).phase is WorkflowPhase.STOPPED
    assert statuses.reads == 0

    caller = statuses.one("wf-r1", NODE)  # a read by a caller, newer than every pass
    passed(run, statuses, OLD_NS + 3, halted=True)
    assert statuses.latest("wf-r1", NODE, since_ns=0) is caller


def test_a_pass_halted_makes_a_stopped_status_when_asked_later(tmp_path: Path) -> None:
    """A pass read while the run was halted: the status made on demand is stopped."""
    run = waiting_run(tmp_path)
    statuses = statuses_of(run)
    passed(run, statuses, OLD_NS, halted=True)
    assert statuses.latest("wf-r1", NODE, since_ns=0).phase is WorkflowPhase.STOPPED


def test_a_callers_read_made_while_a_pass_makes_its_status_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race `saw` checks for under its lock a second time: a caller reads the run while
    the loop's thread makes the status of an older pass; the caller's newer read stays."""
    run = waiting_run(tmp_path)
    statuses = statuses_of(run)
    passed(run, statuses, OLD_NS)
    statuses.latest("wf-r1", NODE, since_ns=0)
    make = statuses_module.backend_status
    caller: list[BackendStatus] = []

    def meanwhile(*args: Any, **kwargs: Any) -> BackendStatus:
        monkeypatch.setattr(statuses_module, "backend_status", make)
        made = make(*args, **kwargs)
        caller.append(statuses.one("wf-r1", NODE))
        return made

    monkeypatch.setattr(statuses_module, "backend_status", meanwhile)
    passed(run, statuses, OLD_NS + 1, halted=True)
    monkeypatch.undo()
    assert statuses.latest("wf-r1", NODE, since_ns=0) is caller[0]
    assert caller[0].phase is not WorkflowPhase.STOPPED

"""Progress lines, reports and cgroup files: what the service reads from the store."""

from __future__ import annotations

import json
import os
import signal
from datetime import UTC, datetime
from pathlib import Path

from simrun_harness.cgroup import Cgroup, own_cgroup_dir
from simrun_harness.exits import EXIT_TERMINATED
from simrun_harness.progress import ProgressWriter, parse_progress_line, read_progress
from simrun_harness.report import UnitSeconds, WorkerReport, read_report, write_report
from tests.harness.conftest import Store


def _fake_cgroup(root: Path, *, oom_kills: int = 0) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cpu.max").write_text("200000 100000\n")
    (root / "memory.max").write_text(f"{3 * 1024**3}\n")
    (root / "memory.stat").write_text(f"anon {512 * 1024**2}\nfile {900 * 1024**2}\n")
    (root / "memory.peak").write_text(f"{1400 * 1024**2}\n")
    (root / "memory.events").write_text(f"low 0\nhigh 0\nmax 3\noom 1\noom_kill {oom_kills}\n")
    return root


def test_progress_lines_parse_and_torn_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    writer = ProgressWriter(path, "t-w1")
    writer.unit_done("u000003", 1.5, 0.25)
    with path.open("a") as handle:
        handle.write('{"event": "unit_do\n\n')
    writer.claims_returned(["u000004"], "t-w2@0")
    writer.close()

    events = list(read_progress(path))

    assert [e.event for e in events] == ["unit_done", "claims_returned"]
    assert events[0].unit == "u000003" and events[0].seconds == 1.5
    assert events[0].peak_memory_gb == 0.25 and events[0].time.tzinfo is not None
    assert events[1].units == ["u000004"] and events[1].holder == "t-w2@0"
    assert parse_progress_line("not json") is None
    assert list(read_progress(tmp_path / "missing.jsonl")) == []


def test_unit_lines_wait_for_a_flush_and_other_events_keep_their_order(tmp_path: Path) -> None:
    """The worker flushes once per wake: a batch of lines is one write."""
    path = tmp_path / "progress.jsonl"
    writer = ProgressWriter(path, "t-w1")
    writer.unit_done("u000001", 0.5, None)
    writer.unit_done("u000002", 0.5, None)
    assert path.read_text() == ""
    writer.flush()
    assert [e.unit for e in read_progress(path)] == ["u000001", "u000002"]
    writer.unit_done("u000003", 0.5, None)
    writer.claims_returned(["u000004"], "t-w2@0")  # written at once, after the waiting line
    assert [e.unit or e.units for e in read_progress(path)][2:] == ["u000003", ["u000004"]]
    writer.unit_done("u000005", 0.5, None)
    writer.close()
    assert [e.unit for e in read_progress(path)][-1] == "u000005"


def test_a_report_round_trips_through_its_file(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    report = WorkerReport(
        task="t",
        worker="t-w1",
        role="extra",
        attempt=2,
        node="node-a",
        processes=4,
        units_done=3,
        unit_seconds=UnitSeconds.of([1.0, 3.0, 2.0]),
        exit_code=0,
        started_at=now,
        ended_at=now,
    )
    path = tmp_path / "reports" / "t-w1-2.json"

    write_report(path, report)

    assert read_report(path) == report
    assert report.unit_seconds == UnitSeconds(count=3, median=2.0, max=3.0)
    assert json.loads(path.read_text())["exit_code"] == 0


def test_cgroup_v2_files_are_read(tmp_path: Path) -> None:
    cgroup = Cgroup(_fake_cgroup(tmp_path / "cg", oom_kills=2))
    assert cgroup.cpu_cores() == 2.0
    assert cgroup.memory_max_bytes() == 3 * 1024**3
    assert cgroup.memory_anon_bytes() == 512 * 1024**2
    assert cgroup.memory_peak_bytes() == 1400 * 1024**2
    assert cgroup.oom_kills() == 2


def test_without_cgroup_v2_files_every_reader_says_none(tmp_path: Path) -> None:
    cgroup = Cgroup(tmp_path)
    readers = [cgroup.cpu_cores, cgroup.memory_max_bytes, cgroup.memory_anon_bytes]
    readers += [cgroup.memory_peak_bytes, cgroup.oom_kills]
    assert [read() for read in readers] == [None] * 5


def test_the_own_cgroup_is_found_from_proc_self_cgroup(tmp_path: Path) -> None:
    _fake_cgroup(tmp_path / "kubepods" / "pod1")
    proc = tmp_path / "proc-cgroup"
    proc.write_text("0::/kubepods/pod1\n")
    assert own_cgroup_dir(tmp_path, proc) == tmp_path / "kubepods" / "pod1"
    proc.write_text("4:memory:/x\n0::/\n")
    assert own_cgroup_dir(tmp_path, proc) == tmp_path


def test_a_report_takes_processes_memory_and_kills_from_the_cgroup(run_store: Store) -> None:
    cgroup = _fake_cgroup(run_store.root.parent / "cgroup")
    run_store.write_task("sleep", {"units": 4, "seconds": 60})
    env = run_store.env("t-w0", SIMRUN_CGROUP_ROOT=str(cgroup), SIMRUN_PROCESSES="")
    env["SIMRUN_MEMORY_PER_WORKER_GB"] = "1"
    worker = run_store.start("simrun-worker", env)
    run_store.wait_claims("t-w0", count=2)
    (cgroup / "memory.events").write_text("oom 2\noom_kill 1\n")  # a kill during the attempt

    os.kill(worker.pid, signal.SIGTERM)

    assert worker.wait() == EXIT_TERMINATED
    report = run_store.report("t-w0")
    assert report.processes == 2  # cpu.max allows two cores; memory.max allows 2 workers
    assert report.memory_source == "cgroup"
    assert report.peak_memory_gb == 0.5
    assert report.memory_limit_gb == 3.0
    assert report.oom_kills == 1 and report.harness_oom_kills == 0


def test_a_report_gives_the_cpu_seconds_of_the_attempt_and_of_its_main_process(
    run_store: Store,
) -> None:
    """Four units that each burn 0.1 CPU s: the attempt's CPU counts them (its pool
    processes, ended and reaped), the main process's part is only the harness's."""
    run_store.write_task("spin", {"units": 4, "seconds": 0.1})
    assert run_store.run("simrun-worker", run_store.env("t-w0", processes=2)) == 0

    report = run_store.report("t-w0")

    assert report.cpu_seconds is not None and report.main_cpu_seconds is not None
    assert report.cpu_seconds >= 0.4
    assert 0 < report.main_cpu_seconds < report.cpu_seconds - 0.4

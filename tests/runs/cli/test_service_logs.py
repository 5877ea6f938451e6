"""serve's logs of its services: rotated by size, a given number kept, nothing lost silently."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from runs.cli.service_logs import LogPump, RotatingLog
from tests.waiting import wait_for


def test_a_log_is_rotated_at_its_size_keeping_the_number_of_backups(tmp_path: Path) -> None:
    log = RotatingLog(tmp_path / "worker.log", max_bytes=100, backups=2)
    for n in range(10):
        log.write(f"line {n:02d} {'x' * 40}\n".encode())  # 49 bytes: two lines a file
    log.close()

    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["worker.log", "worker.log.1", "worker.log.2"]
    assert (tmp_path / "worker.log").read_text().startswith("line 08")
    assert (tmp_path / "worker.log.1").read_text().startswith("line 06")
    assert (tmp_path / "worker.log.2").read_text().startswith("line 04")


def test_without_backups_a_full_log_starts_again_empty(tmp_path: Path) -> None:
    log = RotatingLog(tmp_path / "web.log", max_bytes=100, backups=0)
    for _ in range(5):
        log.write(b"y" * 60 + b"\n")
    log.close()

    assert [p.name for p in tmp_path.iterdir()] == ["web.log"]
    assert (tmp_path / "web.log").stat().st_size == 61


def test_output_that_could_not_be_written_is_counted_in_the_log(tmp_path: Path) -> None:
    """A write refused (here: the log is /dev/full, which refuses every write as a full disk
    does) drops the output; once a write succeeds again the log says how much was lost."""
    log = RotatingLog(tmp_path / "w.log", max_bytes=10_000, backups=1)
    real = log._file
    log._file = open("/dev/full", "wb")  # noqa: SIM115 - the refusing file, closed by the log
    log.write(b"lost line\n")
    log._file = real
    log.write(b"kept line\n")
    log.close()

    assert (tmp_path / "w.log").read_text() == "[simrun: 10 bytes of output lost]\nkept line\n"


def test_the_pump_copies_a_process_output_into_its_log_until_it_ends(tmp_path: Path) -> None:
    log = RotatingLog(tmp_path / "s.log", max_bytes=10_000, backups=1)
    pump = LogPump()
    read, write = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", "print('hello'); print('bye')"], stdout=write)
    os.close(write)
    pump.add(read, log)
    proc.wait()
    wait_for(lambda: (tmp_path / "s.log").read_text() == "hello\nbye\n", what="the output")
    pump.stop()
    log.close()


def test_a_chunk_larger_than_the_room_left_is_cut_after_a_line(tmp_path: Path) -> None:
    log = RotatingLog(tmp_path / "w.log", max_bytes=100, backups=3)
    log.write(b"".join(f"{n:03d} {'z' * 25}\n".encode() for n in range(10)))  # 30 bytes each
    log.close()

    files = sorted(tmp_path.iterdir(), key=lambda p: p.name, reverse=True)
    texts = [p.read_text() for p in files]
    assert all(len(t) <= 100 for t in texts), texts
    assert all(t.endswith("\n") for t in texts), texts
    assert "".join(texts).count("\n") == 10
